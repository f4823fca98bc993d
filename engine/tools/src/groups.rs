//! `ringleader groups`: an admin client for consumer groups over the Kafka wire protocol, with
//! output shaped like Kafka's `kafka-consumer-groups.sh`.
//!
//! This is a client, not part of the broker: blocking std sockets with a timeout on connect, on
//! every read and write, and on every retry loop. It runs against Ringleader or any Kafka broker.
//!
//! Three layers, kept apart so each can be tested alone:
//! - [`AdminConnection`]: the wire plumbing. Connect, negotiate with ApiVersions (v3, falling back
//!   on UNSUPPORTED_VERSION as KIP-511 describes), send a request, read its response and check the
//!   correlation id. Versions are always the highest both sides support.
//! - fetching (`Session`): FindCoordinator, ListGroups, DescribeGroups / ConsumerGroupDescribe,
//!   OffsetFetch, ListOffsets and DeleteGroups, turned into the plain data types below; Metadata,
//!   OffsetCommit (an admin commit: generation -1, no member id) and OffsetDelete for
//!   --reset-offsets and --delete-offsets.
//! - formatting (`format_*`): pure functions from those data types to output lines.
//!
//! Everything, errors included, goes to the one writer given to [`run`]; error lines start with
//! `Error: `. Exit codes: 0 ok, 1 failure (unreachable broker, unsupported API, missing group,
//! failed deletion), 2 bad arguments.

use bytes::{Bytes, BytesMut};
use kafka_protocol::messages::*;
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::ResponseError;
use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream, ToSocketAddrs};
use std::time::{Duration, Instant};
use wire::codec::{decode_response, encode_request};
use wire::{Request, RequestHeader, Response};

// ------------------------------------------------------------------------------------------------
// Arguments
// ------------------------------------------------------------------------------------------------

/// `ringleader groups`: list, describe and delete consumer groups, reset and delete their committed
/// offsets (like kafka-consumer-groups.sh).
#[derive(clap::Args, Debug)]
pub struct GroupsArgs {
    /// Broker to bootstrap from, host:port (a comma-separated list is tried in order).
    #[arg(long, default_value = "127.0.0.1:9092")]
    pub bootstrap: String,
    /// List all consumer groups.
    #[arg(long)]
    pub list: bool,
    /// Describe the groups given with --group (or --all-groups).
    #[arg(long)]
    pub describe: bool,
    /// Delete the groups given with --group (or --all-groups).
    #[arg(long)]
    pub delete: bool,
    /// A group to act on (repeatable).
    #[arg(long)]
    pub group: Vec<String>,
    /// Act on every consumer group.
    #[arg(long)]
    pub all_groups: bool,
    /// With --describe: the group state view. With --list: add a STATE column.
    #[arg(long)]
    pub state: bool,
    /// With --describe: the members view.
    #[arg(long)]
    pub members: bool,
    /// With --describe: the offsets view (the default).
    #[arg(long)]
    pub offsets: bool,
    /// With --describe --members: show each member's assignment.
    #[arg(long)]
    pub verbose: bool,
    /// Reset the committed offsets of the groups given with --group (or --all-groups); a dry run
    /// unless --execute is given.
    #[arg(long)]
    pub reset_offsets: bool,
    /// Delete the committed offsets of one group (--group) for the partitions given with --topic.
    #[arg(long)]
    pub delete_offsets: bool,
    /// With --reset-offsets / --delete-offsets: a topic, or topic:p0,p1,... (repeatable).
    #[arg(long)]
    pub topic: Vec<String>,
    /// With --reset-offsets: every partition the group has a committed offset for.
    #[arg(long)]
    pub all_topics: bool,
    /// Reset to the earliest offset.
    #[arg(long)]
    pub to_earliest: bool,
    /// Reset to the latest offset.
    #[arg(long)]
    pub to_latest: bool,
    /// Reset to the current committed offset (the latest when none is committed).
    #[arg(long)]
    pub to_current: bool,
    /// Reset to this offset (clamped to [earliest, latest]).
    #[arg(long, allow_hyphen_values = true)]
    pub to_offset: Option<i64>,
    /// Shift the committed offset by N (may be negative; clamped to [earliest, latest]).
    #[arg(long, allow_hyphen_values = true)]
    pub shift_by: Option<i64>,
    /// Reset to the first offset at or after this time: YYYY-MM-DDTHH:mm:SS.sss, optionally
    /// followed by Z or +hh:mm / -hh:mm (UTC when no zone is given).
    #[arg(long)]
    pub to_datetime: Option<String>,
    /// Reset to the first offset at or after now minus this duration (PnDTnHnMnS).
    #[arg(long, allow_hyphen_values = true)]
    pub by_duration: Option<String>,
    /// With --reset-offsets: only show the new offsets (the default).
    #[arg(long)]
    pub dry_run: bool,
    /// With --reset-offsets: commit the new offsets.
    #[arg(long)]
    pub execute: bool,
    /// Timeout for connecting, for each request, and for retrying retriable errors.
    #[arg(long, default_value_t = 10_000)]
    pub timeout_ms: u64,
}

/// The longest --timeout-ms accepted (one day); keeps deadline arithmetic far from overflow.
const MAX_TIMEOUT_MS: u64 = 86_400_000;

/// What the arguments ask for, once validated.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Action {
    List {
        state: bool,
    },
    Describe {
        groups: GroupSelection,
        view: DescribeView,
        verbose: bool,
    },
    Delete {
        groups: GroupSelection,
    },
    ResetOffsets {
        groups: GroupSelection,
        /// `None` = --all-topics; otherwise the --topic values.
        topics: Option<Vec<String>>,
        spec: ResetSpec,
        execute: bool,
    },
    DeleteOffsets {
        group: String,
        topics: Vec<String>,
    },
}

/// Where --reset-offsets moves each partition.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ResetSpec {
    Earliest,
    Latest,
    Current,
    Offset(i64),
    ShiftBy(i64),
    /// Epoch milliseconds (from --to-datetime).
    Timestamp(i64),
    /// Milliseconds before now (from --by-duration).
    Duration(i64),
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum GroupSelection {
    /// The --group values, deduplicated, in the order given.
    Named(Vec<String>),
    All,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DescribeView {
    Offsets,
    Members,
    State,
}

/// Check the argument combination (exit code 2 on `Err`). Pure: no I/O.
pub fn validate(args: &GroupsArgs) -> Result<Action, String> {
    let actions = [
        args.list,
        args.describe,
        args.delete,
        args.reset_offsets,
        args.delete_offsets,
    ]
    .iter()
    .filter(|b| **b)
    .count();
    if actions == 0 {
        return Err(
            "one of --list, --describe, --delete, --reset-offsets or --delete-offsets is required"
                .into(),
        );
    }
    if actions > 1 {
        return Err("--list, --describe, --delete, --reset-offsets and --delete-offsets are mutually exclusive".into());
    }
    let reset_opts = args.to_earliest
        || args.to_latest
        || args.to_current
        || args.to_offset.is_some()
        || args.shift_by.is_some()
        || args.to_datetime.is_some()
        || args.by_duration.is_some()
        || args.dry_run
        || args.execute
        || args.all_topics;
    if reset_opts && !args.reset_offsets {
        return Err("--all-topics, --dry-run, --execute and the --to-*/--shift-by/--by-duration scenarios need --reset-offsets".into());
    }
    if !args.topic.is_empty() && !args.reset_offsets && !args.delete_offsets {
        return Err("--topic needs --reset-offsets or --delete-offsets".into());
    }
    if args.timeout_ms == 0 || args.timeout_ms > MAX_TIMEOUT_MS {
        return Err(format!(
            "--timeout-ms must be between 1 and {MAX_TIMEOUT_MS}"
        ));
    }
    if args.bootstrap.split(',').all(|s| s.trim().is_empty()) {
        return Err("--bootstrap must name at least one host:port".into());
    }
    let selection = || -> Result<GroupSelection, String> {
        match (args.group.is_empty(), args.all_groups) {
            (true, false) => Err("this action needs --group or --all-groups".into()),
            (false, true) => Err("--group and --all-groups are mutually exclusive".into()),
            (true, true) => Ok(GroupSelection::All),
            (false, false) => {
                let mut seen = BTreeSet::new();
                Ok(GroupSelection::Named(
                    args.group
                        .iter()
                        .filter(|g| seen.insert(g.as_str()))
                        .cloned()
                        .collect(),
                ))
            }
        }
    };
    if args.list {
        if !args.group.is_empty() || args.all_groups {
            return Err("--list takes no --group or --all-groups".into());
        }
        if args.members || args.offsets || args.verbose {
            return Err("--members, --offsets and --verbose need --describe".into());
        }
        return Ok(Action::List { state: args.state });
    }
    if args.describe {
        let groups = selection()?;
        let view = match (args.offsets, args.members, args.state) {
            (_, false, false) => DescribeView::Offsets,
            (false, true, false) => DescribeView::Members,
            (false, false, true) => DescribeView::State,
            _ => return Err("--offsets, --members and --state are mutually exclusive".into()),
        };
        return Ok(Action::Describe {
            groups,
            view,
            verbose: args.verbose,
        });
    }
    if args.state || args.members || args.offsets || args.verbose {
        return Err("--state, --members, --offsets and --verbose need --describe".into());
    }
    if args.reset_offsets {
        let groups = selection()?;
        let topics = match (args.topic.is_empty(), args.all_topics) {
            (true, false) => {
                return Err(
                    "One of the reset scopes should be defined: --all-topics, --topic.".into(),
                )
            }
            (false, true) => return Err("--topic and --all-topics are mutually exclusive".into()),
            (true, true) => None,
            (false, false) => {
                for t in &args.topic {
                    parse_topic_arg(t)?;
                }
                Some(args.topic.clone())
            }
        };
        let mut specs = Vec::new();
        if args.to_earliest {
            specs.push(ResetSpec::Earliest);
        }
        if args.to_latest {
            specs.push(ResetSpec::Latest);
        }
        if args.to_current {
            specs.push(ResetSpec::Current);
        }
        if let Some(o) = args.to_offset {
            specs.push(ResetSpec::Offset(o));
        }
        if let Some(n) = args.shift_by {
            specs.push(ResetSpec::ShiftBy(n));
        }
        if let Some(d) = &args.to_datetime {
            specs.push(ResetSpec::Timestamp(parse_datetime(d)?));
        }
        if let Some(d) = &args.by_duration {
            specs.push(ResetSpec::Duration(parse_duration_ms(d)?));
        }
        if specs.len() != 1 {
            return Err("Option '[reset-offsets]' requires exactly one of the following scenarios: [to-offset], [to-datetime], [by-duration], [to-earliest], [to-latest], [shift-by], [to-current]".into());
        }
        if args.dry_run && args.execute {
            return Err("--dry-run and --execute are mutually exclusive".into());
        }
        return Ok(Action::ResetOffsets {
            groups,
            topics,
            spec: specs.pop().expect("one scenario"),
            execute: args.execute,
        });
    }
    if args.delete_offsets {
        if args.all_groups || args.group.len() != 1 {
            return Err("--delete-offsets takes exactly one --group".into());
        }
        if args.topic.is_empty() {
            return Err("--delete-offsets needs at least one --topic".into());
        }
        for t in &args.topic {
            parse_topic_arg(t)?;
        }
        return Ok(Action::DeleteOffsets {
            group: args.group[0].clone(),
            topics: args.topic.clone(),
        });
    }
    Ok(Action::Delete {
        groups: selection()?,
    })
}

// ------------------------------------------------------------------------------------------------
// Errors
// ------------------------------------------------------------------------------------------------

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorKind {
    /// Could not connect to (or resolve) an address.
    Connect,
    /// The connection failed mid-request (timeout, reset, closed).
    Io,
    /// The broker does not serve an API (or any version of it this client speaks).
    Unsupported,
    /// A malformed or unexpected response.
    Protocol,
    /// A broker error worth retrying (coordinator loading, moved or unavailable).
    Retriable,
    /// A broker error that retrying will not fix.
    Broker,
    /// The group does not exist (or is dead).
    GroupNotFound,
}

#[derive(Debug, Clone)]
pub struct AdminError {
    pub kind: ErrorKind,
    pub message: String,
    /// The Kafka error code behind a broker error, if any.
    pub code: Option<i16>,
}

impl AdminError {
    fn new(kind: ErrorKind, message: impl Into<String>) -> Self {
        Self {
            kind,
            message: message.into(),
            code: None,
        }
    }
}

impl fmt::Display for AdminError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for AdminError {}

/// Kafka's name for an error code, as in its `Errors` enum: `NON_EMPTY_GROUP`, `NONE` for 0.
pub fn error_name(code: i16) -> String {
    match ResponseError::try_from_code(code) {
        None => "NONE".into(),
        Some(ResponseError::Unknown(c)) => format!("UNKNOWN_ERROR_CODE_{c}"),
        Some(e) => {
            // The crate's variants are Kafka's names in CamelCase.
            let camel = format!("{e:?}");
            let mut out = String::with_capacity(camel.len() + 8);
            for (i, ch) in camel.chars().enumerate() {
                if ch.is_ascii_uppercase() && i > 0 {
                    out.push('_');
                }
                out.push(ch.to_ascii_uppercase());
            }
            out
        }
    }
}

use wire::error::is_coordinator_unavailable as is_retriable_group_error;

/// An error code in a response to `api` about `what`: retriable coordinator errors are marked so.
fn broker_error(api: &str, what: &str, code: i16, message: Option<&str>) -> AdminError {
    let mut text = format!("{api} for {what} failed: {}", error_name(code));
    if let Some(m) = message.filter(|m| !m.is_empty()) {
        text.push_str(&format!(" ({m})"));
    }
    AdminError {
        kind: if is_retriable_group_error(code) {
            ErrorKind::Retriable
        } else {
            ErrorKind::Broker
        },
        message: text,
        code: Some(code),
    }
}

fn not_found(group: &str) -> AdminError {
    AdminError {
        kind: ErrorKind::GroupNotFound,
        message: format!("Consumer group '{group}' does not exist."),
        code: Some(ResponseError::GroupIdNotFound.code()),
    }
}

fn unexpected(api: &str) -> AdminError {
    AdminError::new(
        ErrorKind::Protocol,
        format!("the broker answered {api} with a different response type"),
    )
}

// ------------------------------------------------------------------------------------------------
// Wire plumbing
// ------------------------------------------------------------------------------------------------

/// One API this client speaks, with the versions it can send.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ApiSpec {
    pub key: i16,
    pub name: &'static str,
    pub min: i16,
    pub max: i16,
}

const fn api(key: i16, name: &'static str, min: i16, max: i16) -> ApiSpec {
    ApiSpec {
        key,
        name,
        min,
        max,
    }
}

pub const API_VERSIONS: ApiSpec = api(18, "ApiVersions", 0, 3);
pub const FIND_COORDINATOR: ApiSpec = api(10, "FindCoordinator", 0, 6);
pub const LIST_GROUPS: ApiSpec = api(16, "ListGroups", 0, 5);
pub const DESCRIBE_GROUPS: ApiSpec = api(15, "DescribeGroups", 0, 5);
pub const OFFSET_FETCH: ApiSpec = api(9, "OffsetFetch", 1, 9);
pub const LIST_OFFSETS: ApiSpec = api(2, "ListOffsets", 1, 10);
pub const DELETE_GROUPS: ApiSpec = api(42, "DeleteGroups", 0, 2);
pub const CONSUMER_GROUP_DESCRIBE: ApiSpec = api(69, "ConsumerGroupDescribe", 0, 1);
pub const METADATA: ApiSpec = api(3, "Metadata", 1, 12);
pub const OFFSET_COMMIT: ApiSpec = api(8, "OffsetCommit", 2, 9);
pub const OFFSET_DELETE: ApiSpec = api(47, "OffsetDelete", 0, 0);

/// The largest response frame accepted. The body is read in chunks, so a lying length costs at
/// most what the peer really sends.
pub const MAX_RESPONSE_BYTES: usize = 100 * 1024 * 1024;
const READ_CHUNK: usize = 64 * 1024;

/// A blocking connection to one broker that has completed ApiVersions negotiation.
///
/// Every read and write is bounded by the timeout. After any I/O failure the connection is
/// marked broken and later calls fail at once (its byte stream is no longer in a known state).
pub struct AdminConnection {
    sock: TcpStream,
    peer: SocketAddr,
    address: String,
    client_id: String,
    timeout: Duration,
    next_correlation_id: i32,
    api_ranges: BTreeMap<i16, (i16, i16)>,
    broken: bool,
}

impl fmt::Debug for AdminConnection {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AdminConnection")
            .field("address", &self.address)
            .field("peer", &self.peer)
            .field("broken", &self.broken)
            .finish()
    }
}

impl AdminConnection {
    /// Connect to `address` (host:port) within `timeout` and negotiate API versions.
    pub fn connect(address: &str, timeout: Duration, client_id: &str) -> Result<Self, AdminError> {
        let timeout = timeout.max(Duration::from_millis(1));
        let addrs: Vec<SocketAddr> = address
            .to_socket_addrs()
            .map_err(|e| {
                AdminError::new(
                    ErrorKind::Connect,
                    format!("cannot resolve broker address '{address}': {e}"),
                )
            })?
            .collect();
        let mut last = format!("'{address}' resolved to no address");
        for addr in addrs {
            match TcpStream::connect_timeout(&addr, timeout) {
                Ok(sock) => {
                    let _ = sock.set_nodelay(true);
                    let mut conn = AdminConnection {
                        sock,
                        peer: addr,
                        address: address.to_string(),
                        client_id: client_id.to_string(),
                        timeout,
                        next_correlation_id: 1,
                        api_ranges: BTreeMap::new(),
                        broken: false,
                    };
                    conn.negotiate()?;
                    return Ok(conn);
                }
                Err(e) => last = format!("{addr}: {e}"),
            }
        }
        Err(AdminError::new(
            ErrorKind::Connect,
            format!("cannot connect to broker {address} ({last})"),
        ))
    }

    /// The address this connection was opened with.
    pub fn address(&self) -> &str {
        &self.address
    }

    pub fn peer_addr(&self) -> SocketAddr {
        self.peer
    }

    /// The broker's advertised (min, max) versions of an API, if it serves it.
    pub fn api_range(&self, api_key: i16) -> Option<(i16, i16)> {
        self.api_ranges.get(&api_key).copied()
    }

    /// The highest version of `api` both sides support.
    pub fn version_for(&self, api: ApiSpec) -> Option<i16> {
        let (bmin, bmax) = self.api_range(api.key)?;
        let lo = bmin.max(api.min);
        let hi = bmax.min(api.max);
        (lo <= hi).then_some(hi)
    }

    /// Like [`Self::version_for`], with a clear error when there is no common version.
    pub fn require(&self, api: ApiSpec) -> Result<i16, AdminError> {
        self.version_for(api).ok_or_else(|| {
            let detail = match self.api_range(api.key) {
                None => String::new(),
                Some((lo, hi)) => format!(
                    " (it serves versions {lo}-{hi}, this client speaks {}-{})",
                    api.min, api.max
                ),
            };
            AdminError::new(
                ErrorKind::Unsupported,
                format!(
                    "broker does not support {} (api key {}) at {}{detail}",
                    api.name, api.key, self.address
                ),
            )
        })
    }

    /// Send `request` at `version` and return the decoded response.
    pub fn call(&mut self, version: i16, request: &Request) -> Result<Response, AdminError> {
        let frame = self.round_trip(version, request)?;
        decode_response(request.api_key(), version, &frame)
            .map(|(_, r)| r)
            .map_err(|e| {
                AdminError::new(
                    ErrorKind::Protocol,
                    format!(
                        "cannot decode the {} v{version} response from {}: {e:#}",
                        api_name(request.api_key()),
                        self.address
                    ),
                )
            })
    }

    /// ApiVersions: start at v3; on UNSUPPORTED_VERSION (answered as a v0 body) retry at the
    /// highest version the broker listed for ApiVersions, or v0.
    fn negotiate(&mut self) -> Result<(), AdminError> {
        let mut version = API_VERSIONS.max;
        for _ in 0..=API_VERSIONS.max {
            let req = ApiVersionsRequest::default()
                .with_client_software_name(StrBytes::from_static_str("ringleader-admin"))
                .with_client_software_version(StrBytes::from_static_str(env!("CARGO_PKG_VERSION")));
            let frame = self.round_trip(version, &Request::ApiVersions(req))?;
            let resp = match decode_response(API_VERSIONS.key, version, &frame) {
                Ok((_, Response::ApiVersions(r)))
                    if r.error_code != ResponseError::UnsupportedVersion.code() =>
                {
                    r
                }
                // An error reply to a too-new version is a v0 body whatever we sent.
                _ => match decode_response(API_VERSIONS.key, 0, &frame) {
                    Ok((_, Response::ApiVersions(r))) => r,
                    Ok(_) => return Err(unexpected("ApiVersions")),
                    Err(e) => {
                        return Err(AdminError::new(
                            ErrorKind::Protocol,
                            format!(
                                "cannot decode the ApiVersions response from {}: {e:#}",
                                self.address
                            ),
                        ))
                    }
                },
            };
            if resp.error_code == ResponseError::UnsupportedVersion.code() && version > 0 {
                let advertised = resp
                    .api_keys
                    .iter()
                    .find(|k| k.api_key == API_VERSIONS.key)
                    .map(|k| k.max_version);
                version = match advertised {
                    Some(max) if max >= 0 && max < version => max,
                    _ => 0,
                };
                continue;
            }
            if resp.error_code != 0 {
                return Err(broker_error(
                    "ApiVersions",
                    &self.address.clone(),
                    resp.error_code,
                    None,
                ));
            }
            self.api_ranges = resp
                .api_keys
                .iter()
                .map(|k| (k.api_key, (k.min_version, k.max_version)))
                .collect();
            return Ok(());
        }
        Err(AdminError::new(
            ErrorKind::Protocol,
            format!("{} rejected every ApiVersions version", self.address),
        ))
    }

    /// Write one request frame and read its response frame (without the length prefix).
    fn round_trip(&mut self, version: i16, request: &Request) -> Result<Bytes, AdminError> {
        let name = api_name(request.api_key());
        if self.broken {
            return Err(AdminError::new(
                ErrorKind::Io,
                format!(
                    "the connection to {} failed earlier; not sending {name}",
                    self.address
                ),
            ));
        }
        let correlation_id = self.next_correlation_id;
        self.next_correlation_id = if correlation_id == i32::MAX {
            1
        } else {
            correlation_id + 1
        };
        let header = RequestHeader {
            api_key: request.api_key(),
            api_version: version,
            correlation_id,
            client_id: Some(self.client_id.clone()),
        };
        let mut buf = BytesMut::new();
        encode_request(&header, request, &mut buf).map_err(|e| {
            AdminError::new(
                ErrorKind::Protocol,
                format!("cannot encode {name} v{version}: {e:#}"),
            )
        })?;
        let result = self.exchange(&buf, name, version, correlation_id);
        if result.is_err() {
            self.broken = true;
        }
        result
    }

    fn exchange(
        &mut self,
        buf: &[u8],
        name: &str,
        version: i16,
        correlation_id: i32,
    ) -> Result<Bytes, AdminError> {
        let deadline = Instant::now() + self.timeout;
        let io_err = |what: &str, e: std::io::Error| {
            let detail = match e.kind() {
                std::io::ErrorKind::TimedOut | std::io::ErrorKind::WouldBlock => {
                    format!("timed out after {} ms", self.timeout.as_millis())
                }
                std::io::ErrorKind::UnexpectedEof => {
                    "the broker closed the connection (it may not accept this request version)"
                        .to_string()
                }
                _ => e.to_string(),
            };
            AdminError::new(
                ErrorKind::Io,
                format!("{what} {name} v{version} ({}): {detail}", self.address),
            )
        };
        self.sock
            .set_write_timeout(Some(self.timeout))
            .and_then(|_| self.sock.write_all(buf))
            .map_err(|e| io_err("sending", e))?;
        let mut len = [0u8; 4];
        read_exact_by(&mut self.sock, &mut len, deadline)
            .map_err(|e| io_err("reading the response to", e))?;
        let len = i32::from_be_bytes(len);
        if len < 4 || len as usize > MAX_RESPONSE_BYTES {
            return Err(AdminError::new(
                ErrorKind::Protocol,
                format!(
                    "{} sent a response frame of {len} bytes to {name}",
                    self.address
                ),
            ));
        }
        let len = len as usize;
        let mut body = Vec::with_capacity(len.min(READ_CHUNK));
        while body.len() < len {
            let start = body.len();
            let chunk = (len - start).min(READ_CHUNK);
            body.resize(start + chunk, 0);
            read_exact_by(&mut self.sock, &mut body[start..], deadline)
                .map_err(|e| io_err("reading the response to", e))?;
        }
        let got = i32::from_be_bytes([body[0], body[1], body[2], body[3]]);
        if got != correlation_id {
            return Err(AdminError::new(
                ErrorKind::Protocol,
                format!(
                    "{} answered {name} with correlation id {got}, expected {correlation_id}",
                    self.address
                ),
            ));
        }
        Ok(Bytes::from(body))
    }
}

/// `read_exact` that gives up at `deadline`, however slowly the peer drips bytes.
fn read_exact_by(sock: &mut TcpStream, buf: &mut [u8], deadline: Instant) -> std::io::Result<()> {
    let mut filled = 0;
    while filled < buf.len() {
        let now = Instant::now();
        if now >= deadline {
            return Err(std::io::ErrorKind::TimedOut.into());
        }
        sock.set_read_timeout(Some((deadline - now).max(Duration::from_millis(1))))?;
        match sock.read(&mut buf[filled..]) {
            Ok(0) => return Err(std::io::ErrorKind::UnexpectedEof.into()),
            Ok(n) => filled += n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

fn api_name(key: i16) -> &'static str {
    match key {
        18 => "ApiVersions",
        10 => "FindCoordinator",
        16 => "ListGroups",
        15 => "DescribeGroups",
        9 => "OffsetFetch",
        2 => "ListOffsets",
        42 => "DeleteGroups",
        69 => "ConsumerGroupDescribe",
        3 => "Metadata",
        8 => "OffsetCommit",
        47 => "OffsetDelete",
        _ => "request",
    }
}

fn sb(s: &str) -> StrBytes {
    StrBytes::from_string(s.to_string())
}

// ------------------------------------------------------------------------------------------------
// Data (what formatting consumes)
// ------------------------------------------------------------------------------------------------

/// Topic → sorted, deduplicated partitions.
pub type TopicPartitions = BTreeMap<String, Vec<i32>>;

/// A broker, as FindCoordinator names it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Node {
    pub id: i32,
    pub host: String,
    pub port: i32,
}

impl Node {
    /// `host:port`, with brackets around an IPv6 literal.
    pub fn address(&self) -> String {
        if self.host.contains(':') {
            format!("[{}]:{}", self.host, self.port)
        } else {
            format!("{}:{}", self.host, self.port)
        }
    }
}

/// One ListGroups entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ListedGroup {
    pub group_id: String,
    pub protocol_type: String,
    /// ListGroups v4+.
    pub state: Option<String>,
    /// ListGroups v5+ (`classic`, `consumer`, `share`, `streams`).
    pub group_type: Option<String>,
}

impl ListedGroup {
    /// Whether kafka-consumer-groups.sh would show it: consumer-protocol groups, and classic
    /// groups with protocol type `consumer` or none (an empty group).
    pub fn is_consumer_group(&self) -> bool {
        match self.group_type.as_deref().map(str::to_ascii_lowercase) {
            Some(t) if t == "consumer" => true,
            Some(t) if t != "classic" && !t.is_empty() => false,
            _ => self.protocol_type.is_empty() || self.protocol_type == "consumer",
        }
    }

    pub fn is_consumer_protocol(&self) -> bool {
        self.group_type
            .as_deref()
            .is_some_and(|t| t.eq_ignore_ascii_case("consumer"))
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GroupKind {
    /// JoinGroup/SyncGroup groups, described with DescribeGroups.
    Classic,
    /// KIP-848 groups, described with ConsumerGroupDescribe.
    Consumer,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MemberDescription {
    pub member_id: String,
    pub group_instance_id: Option<String>,
    pub client_id: String,
    pub host: String,
    /// Current assignment; `None` when unknown (no or undecodable assignment bytes).
    pub assignment: Option<TopicPartitions>,
    /// Consumer groups: the target assignment.
    pub target_assignment: Option<TopicPartitions>,
    /// Consumer groups: the member epoch.
    pub member_epoch: Option<i32>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GroupDescription {
    pub group_id: String,
    pub kind: GroupKind,
    pub state: String,
    pub protocol_type: String,
    /// Classic: the selected protocol (assignor); consumer: the server assignor.
    pub assignment_strategy: String,
    pub coordinator: Option<Node>,
    /// Consumer groups only.
    pub group_epoch: Option<i32>,
    /// Consumer groups only.
    pub target_assignment_epoch: Option<i32>,
    pub members: Vec<MemberDescription>,
}

/// Partition key used for offsets.
pub type TopicPartition = (String, i32);

/// Decode classic `consumer` protocol assignment bytes (`ConsumerProtocolAssignment`: int16
/// version, then the struct). Newer versions are read by their known v3 prefix. Returns `None`
/// on empty or malformed bytes; never panics or allocates more than the input justifies.
pub fn decode_consumer_assignment(bytes: &[u8]) -> Option<TopicPartitions> {
    let decoded = wire::consumer_protocol::decode_assignment(bytes).ok()?;
    let mut out = TopicPartitions::new();
    for tp in decoded.assigned_partitions {
        out.entry(tp.topic.0.to_string())
            .or_default()
            .extend(tp.partitions);
    }
    Some(normalize(out))
}

/// Encode an assignment as `ConsumerProtocolAssignment` bytes (version prefix included).
pub fn encode_consumer_assignment(assignment: &TopicPartitions, version: i16) -> Bytes {
    wire::consumer_protocol::encode_assignment(
        assignment.iter().map(|(t, ps)| (sb(t), ps.clone())),
        version,
    )
}

fn normalize(mut tps: TopicPartitions) -> TopicPartitions {
    for ps in tps.values_mut() {
        ps.sort_unstable();
        ps.dedup();
    }
    tps
}

// ------------------------------------------------------------------------------------------------
// Fetching
// ------------------------------------------------------------------------------------------------

const MAX_ATTEMPTS: u32 = 60;

/// One group's FindCoordinator outcome.
type CoordinatorLookup = (String, Result<Node, AdminError>);
const CLIENT_ID: &str = "ringleader-admin";

/// The bootstrap connection plus connections to coordinators elsewhere, and cached lookups.
struct Session {
    timeout: Duration,
    bootstrap: AdminConnection,
    others: Vec<(String, AdminConnection)>,
    coordinators: BTreeMap<String, Node>,
    listed: Option<Vec<ListedGroup>>,
}

impl Session {
    fn connect(bootstrap: &str, timeout: Duration) -> Result<Self, AdminError> {
        let mut last = None;
        for addr in bootstrap
            .split(',')
            .map(str::trim)
            .filter(|s| !s.is_empty())
        {
            match AdminConnection::connect(addr, timeout, CLIENT_ID) {
                Ok(conn) => {
                    return Ok(Session {
                        timeout,
                        bootstrap: conn,
                        others: Vec::new(),
                        coordinators: BTreeMap::new(),
                        listed: None,
                    })
                }
                Err(e) => last = Some(e),
            }
        }
        Err(last.unwrap_or_else(|| AdminError::new(ErrorKind::Connect, "no bootstrap address")))
    }

    /// Run `f` until it succeeds, fails for good, or the timeout passes; bounded in attempts too.
    fn retrying<T>(
        &mut self,
        mut f: impl FnMut(&mut Session) -> Result<T, AdminError>,
    ) -> Result<T, AdminError> {
        let deadline = Instant::now() + self.timeout;
        let mut backoff = Duration::from_millis(50);
        let mut attempts = 0;
        loop {
            attempts += 1;
            match f(self) {
                Err(e) if e.kind == ErrorKind::Retriable => {
                    if attempts >= MAX_ATTEMPTS || Instant::now() + backoff >= deadline {
                        return Err(AdminError {
                            kind: ErrorKind::Broker,
                            message: format!(
                                "{e} (still failing after {attempts} attempts in {} ms)",
                                self.timeout.as_millis()
                            ),
                            code: e.code,
                        });
                    }
                    std::thread::sleep(backoff);
                    backoff = (backoff * 2).min(Duration::from_secs(1));
                }
                other => return other,
            }
        }
    }

    /// The connection to `node`: the bootstrap one when it is the same broker.
    fn conn_for(&mut self, node: &Node) -> Result<&mut AdminConnection, AdminError> {
        let key = node.address();
        if node.port < 0 || node.port > u16::MAX as i32 {
            return Err(AdminError::new(
                ErrorKind::Protocol,
                format!("coordinator {key} has an invalid port"),
            ));
        }
        let same_as_bootstrap = key == self.bootstrap.address()
            || key
                .to_socket_addrs()
                .map(|mut it| it.any(|a| a == self.bootstrap.peer_addr()))
                .unwrap_or(false);
        if same_as_bootstrap {
            return Ok(&mut self.bootstrap);
        }
        let idx = match self.others.iter().position(|(k, _)| *k == key) {
            Some(i) => i,
            None => {
                let conn = AdminConnection::connect(&key, self.timeout, CLIENT_ID)?;
                self.others.push((key, conn));
                self.others.len() - 1
            }
        };
        Ok(&mut self.others[idx].1)
    }

    /// Look up coordinators (one batched request when FindCoordinator v4+ is served) and cache
    /// the ones found. Returns the per-group outcome.
    fn lookup_coordinators(
        &mut self,
        groups: &[String],
    ) -> Result<Vec<CoordinatorLookup>, AdminError> {
        let v = self.bootstrap.require(FIND_COORDINATOR)?;
        let mut out = Vec::with_capacity(groups.len());
        if v >= 4 {
            let req = FindCoordinatorRequest::default()
                .with_key_type(0)
                .with_coordinator_keys(groups.iter().map(|g| sb(g)).collect());
            let Response::FindCoordinator(resp) =
                self.bootstrap.call(v, &Request::FindCoordinator(req))?
            else {
                return Err(unexpected("FindCoordinator"));
            };
            for g in groups {
                let entry = resp.coordinators.iter().find(|c| c.key.as_str() == g);
                let result = match entry {
                    None => Err(AdminError::new(
                        ErrorKind::Protocol,
                        format!("FindCoordinator returned no entry for group '{g}'"),
                    )),
                    Some(c) if c.error_code != 0 => Err(broker_error(
                        "FindCoordinator",
                        &format!("group '{g}'"),
                        c.error_code,
                        c.error_message.as_deref(),
                    )),
                    Some(c) => Ok(Node {
                        id: c.node_id.0,
                        host: c.host.to_string(),
                        port: c.port,
                    }),
                };
                out.push((g.clone(), result));
            }
        } else {
            for g in groups {
                // KeyType (v1+) defaults to 0, a group.
                let req = FindCoordinatorRequest::default().with_key(sb(g));
                let Response::FindCoordinator(resp) =
                    self.bootstrap.call(v, &Request::FindCoordinator(req))?
                else {
                    return Err(unexpected("FindCoordinator"));
                };
                let result = if resp.error_code != 0 {
                    Err(broker_error(
                        "FindCoordinator",
                        &format!("group '{g}'"),
                        resp.error_code,
                        resp.error_message.as_deref(),
                    ))
                } else {
                    Ok(Node {
                        id: resp.node_id.0,
                        host: resp.host.to_string(),
                        port: resp.port,
                    })
                };
                out.push((g.clone(), result));
            }
        }
        for (g, r) in &out {
            if let Ok(node) = r {
                self.coordinators.insert(g.clone(), node.clone());
            }
        }
        Ok(out)
    }

    fn coordinator(&mut self, group: &str) -> Result<Node, AdminError> {
        if let Some(n) = self.coordinators.get(group) {
            return Ok(n.clone());
        }
        let mut found = self.lookup_coordinators(&[group.to_string()])?;
        found
            .pop()
            .map(|(_, r)| r)
            .unwrap_or_else(|| Err(unexpected("FindCoordinator")))
    }

    fn list_groups(&mut self) -> Result<Vec<ListedGroup>, AdminError> {
        if let Some(l) = &self.listed {
            return Ok(l.clone());
        }
        let listed = self.retrying(|s| {
            let v = s.bootstrap.require(LIST_GROUPS)?;
            let Response::ListGroups(resp) = s
                .bootstrap
                .call(v, &Request::ListGroups(ListGroupsRequest::default()))?
            else {
                return Err(unexpected("ListGroups"));
            };
            if resp.error_code != 0 {
                let addr = s.bootstrap.address().to_string();
                return Err(broker_error("ListGroups", &addr, resp.error_code, None));
            }
            Ok(resp
                .groups
                .iter()
                .map(|g| ListedGroup {
                    group_id: g.group_id.0.to_string(),
                    protocol_type: g.protocol_type.to_string(),
                    state: (v >= 4).then(|| g.group_state.to_string()),
                    group_type: (v >= 5 && !g.group_type.is_empty())
                        .then(|| g.group_type.to_string()),
                })
                .collect::<Vec<_>>())
        })?;
        self.listed = Some(listed.clone());
        Ok(listed)
    }

    /// The consumer groups to act on for `--all-groups`, sorted.
    fn all_consumer_groups(&mut self) -> Result<Vec<String>, AdminError> {
        let mut ids: Vec<String> = self
            .list_groups()?
            .into_iter()
            .filter(ListedGroup::is_consumer_group)
            .map(|g| g.group_id)
            .collect();
        ids.sort();
        ids.dedup();
        Ok(ids)
    }

    /// Whether ListGroups v5 reports `group` as a consumer-protocol (KIP-848) group. Only asked
    /// when the broker serves both ListGroups v5 and ConsumerGroupDescribe.
    fn is_consumer_protocol(&mut self, group: &str) -> Result<bool, AdminError> {
        let lg5 = self
            .bootstrap
            .version_for(LIST_GROUPS)
            .is_some_and(|v| v >= 5);
        if !lg5
            || self
                .bootstrap
                .version_for(CONSUMER_GROUP_DESCRIBE)
                .is_none()
        {
            return Ok(false);
        }
        Ok(self
            .list_groups()?
            .iter()
            .any(|g| g.group_id == group && g.is_consumer_protocol()))
    }

    fn describe(&mut self, group: &str) -> Result<GroupDescription, AdminError> {
        let consumer = self.is_consumer_protocol(group)?;
        self.retrying(|s| {
            let node = s.coordinator(group)?;
            let conn = s.conn_for(&node)?;
            let result = if consumer && conn.version_for(CONSUMER_GROUP_DESCRIBE).is_some() {
                describe_consumer(conn, group)
            } else {
                describe_classic(conn, group)
            };
            match result {
                Ok(mut d) => {
                    d.coordinator = Some(node);
                    Ok(d)
                }
                Err(e) => {
                    if e.kind == ErrorKind::Retriable {
                        s.coordinators.remove(group);
                    }
                    Err(e)
                }
            }
        })
    }

    /// Committed offsets of the group (OffsetFetch: all topics from v2, the assigned topics at
    /// v1). Partitions without a committed offset are left out.
    fn committed_offsets(
        &mut self,
        desc: &GroupDescription,
    ) -> Result<BTreeMap<TopicPartition, i64>, AdminError> {
        let group = desc.group_id.as_str();
        let mut assigned = TopicPartitions::new();
        for m in &desc.members {
            for (t, ps) in m.assignment.iter().flatten() {
                assigned.entry(t.clone()).or_default().extend(ps);
            }
        }
        let assigned = normalize(assigned);
        self.retrying(|s| {
            let node = s.coordinator(group)?;
            let conn = s.conn_for(&node)?;
            let result = offset_fetch(conn, group, &assigned);
            if matches!(&result, Err(e) if e.kind == ErrorKind::Retriable) {
                s.coordinators.remove(group);
            }
            result
        })
    }

    /// Latest offsets (ListOffsets, timestamp -1) asked of the bootstrap broker, which is every
    /// partition's leader in a single-broker Ringleader. Empty when ListOffsets is not served.
    fn log_end_offsets(
        &mut self,
        partitions: &BTreeSet<TopicPartition>,
    ) -> Result<BTreeMap<TopicPartition, i64>, AdminError> {
        if self.bootstrap.version_for(LIST_OFFSETS).is_none() {
            return Ok(BTreeMap::new());
        }
        let mut out = self.list_offsets(partitions, -1)?;
        out.retain(|_, offset| *offset >= 0);
        Ok(out)
    }

    /// Delete groups, retrying coordinator moves until the timeout. `None` = deleted, `Some(name)`
    /// = the Kafka error name it failed with.
    fn delete_groups(
        &mut self,
        groups: &[String],
    ) -> Result<Vec<(String, Option<String>)>, AdminError> {
        let mut results: BTreeMap<String, Option<String>> = BTreeMap::new();
        let mut pending: Vec<String> = groups.to_vec();
        let deadline = Instant::now() + self.timeout;
        let mut backoff = Duration::from_millis(50);
        for _ in 0..MAX_ATTEMPTS {
            let missing: Vec<String> = pending
                .iter()
                .filter(|g| !self.coordinators.contains_key(*g))
                .cloned()
                .collect();
            let mut retry: Vec<(String, String)> = Vec::new();
            let mut by_node: Vec<(Node, Vec<String>)> = Vec::new();
            if !missing.is_empty() {
                for (g, r) in self.lookup_coordinators(&missing)? {
                    match r {
                        Ok(_) => {}
                        Err(e) if e.kind == ErrorKind::Retriable => {
                            retry.push((g, error_name(e.code.unwrap_or(-1))))
                        }
                        Err(e) => {
                            let name = e.code.map(error_name).unwrap_or(e.message);
                            results.insert(g, Some(name));
                        }
                    }
                }
            }
            for g in &pending {
                if let Some(node) = self.coordinators.get(g) {
                    match by_node.iter_mut().find(|(n, _)| n == node) {
                        Some((_, gs)) => gs.push(g.clone()),
                        None => by_node.push((node.clone(), vec![g.clone()])),
                    }
                }
            }
            for (node, gs) in by_node {
                let conn = self.conn_for(&node)?;
                let v = conn.require(DELETE_GROUPS)?;
                let req = DeleteGroupsRequest::default()
                    .with_groups_names(gs.iter().map(|g| GroupId(sb(g))).collect());
                let Response::DeleteGroups(resp) = conn.call(v, &Request::DeleteGroups(req))?
                else {
                    return Err(unexpected("DeleteGroups"));
                };
                for g in gs {
                    match resp.results.iter().find(|r| r.group_id.0.as_str() == g) {
                        None => {
                            results.insert(g, Some("NO_RESULT_FROM_BROKER".into()));
                        }
                        Some(r) if r.error_code == 0 => {
                            results.insert(g, None);
                        }
                        Some(r) if is_retriable_group_error(r.error_code) => {
                            self.coordinators.remove(&g);
                            retry.push((g, error_name(r.error_code)));
                        }
                        Some(r) => {
                            results.insert(g, Some(error_name(r.error_code)));
                        }
                    }
                }
            }
            if retry.is_empty() {
                break;
            }
            if Instant::now() + backoff >= deadline {
                for (g, name) in retry {
                    results.insert(g, Some(name));
                }
                break;
            }
            pending = retry.into_iter().map(|(g, _)| g).collect();
            std::thread::sleep(backoff);
            backoff = (backoff * 2).min(Duration::from_secs(1));
        }
        // Keep the requested order.
        Ok(groups
            .iter()
            .map(|g| {
                let r = results
                    .get(g)
                    .cloned()
                    .unwrap_or_else(|| Some("REQUEST_TIMED_OUT".into()));
                (g.clone(), r)
            })
            .collect())
    }
}

fn describe_classic(
    conn: &mut AdminConnection,
    group: &str,
) -> Result<GroupDescription, AdminError> {
    let v = conn.require(DESCRIBE_GROUPS)?;
    let req = DescribeGroupsRequest::default().with_groups(vec![GroupId(sb(group))]);
    let Response::DescribeGroups(resp) = conn.call(v, &Request::DescribeGroups(req))? else {
        return Err(unexpected("DescribeGroups"));
    };
    let Some(g) = resp
        .groups
        .into_iter()
        .find(|g| g.group_id.0.as_str() == group)
    else {
        return Err(AdminError::new(
            ErrorKind::Protocol,
            format!("DescribeGroups returned no entry for group '{group}'"),
        ));
    };
    if g.error_code == ResponseError::GroupIdNotFound.code()
        || (g.error_code == 0 && g.group_state.as_str() == "Dead")
    {
        return Err(not_found(group));
    }
    if g.error_code != 0 {
        return Err(broker_error(
            "DescribeGroups",
            &format!("group '{group}'"),
            g.error_code,
            g.error_message.as_deref(),
        ));
    }
    let consumer_protocol = g.protocol_type.as_str() == "consumer";
    let members = g
        .members
        .iter()
        .map(|m| MemberDescription {
            member_id: m.member_id.to_string(),
            group_instance_id: m.group_instance_id.as_ref().map(|s| s.to_string()),
            client_id: m.client_id.to_string(),
            host: m.client_host.to_string(),
            assignment: if consumer_protocol {
                decode_consumer_assignment(&m.member_assignment)
            } else {
                None
            },
            target_assignment: None,
            member_epoch: None,
        })
        .collect();
    Ok(GroupDescription {
        group_id: group.to_string(),
        kind: GroupKind::Classic,
        state: g.group_state.to_string(),
        protocol_type: g.protocol_type.to_string(),
        assignment_strategy: g.protocol_data.to_string(),
        coordinator: None,
        group_epoch: None,
        target_assignment_epoch: None,
        members,
    })
}

fn describe_consumer(
    conn: &mut AdminConnection,
    group: &str,
) -> Result<GroupDescription, AdminError> {
    let v = conn.require(CONSUMER_GROUP_DESCRIBE)?;
    let req = ConsumerGroupDescribeRequest::default().with_group_ids(vec![GroupId(sb(group))]);
    let Response::ConsumerGroupDescribe(resp) =
        conn.call(v, &Request::ConsumerGroupDescribe(req))?
    else {
        return Err(unexpected("ConsumerGroupDescribe"));
    };
    let Some(g) = resp
        .groups
        .into_iter()
        .find(|g| g.group_id.0.as_str() == group)
    else {
        return Err(AdminError::new(
            ErrorKind::Protocol,
            format!("ConsumerGroupDescribe returned no entry for group '{group}'"),
        ));
    };
    if g.error_code == ResponseError::GroupIdNotFound.code()
        || (g.error_code == 0 && g.group_state.as_str() == "Dead")
    {
        return Err(not_found(group));
    }
    if g.error_code != 0 {
        return Err(broker_error(
            "ConsumerGroupDescribe",
            &format!("group '{group}'"),
            g.error_code,
            g.error_message.as_deref(),
        ));
    }
    let tps = |a: &consumer_group_describe_response::Assignment| {
        let mut out = TopicPartitions::new();
        for t in &a.topic_partitions {
            out.entry(t.topic_name.0.to_string())
                .or_default()
                .extend(t.partitions.iter().copied());
        }
        normalize(out)
    };
    let members = g
        .members
        .iter()
        .map(|m| MemberDescription {
            member_id: m.member_id.to_string(),
            group_instance_id: m.instance_id.as_ref().map(|s| s.to_string()),
            client_id: m.client_id.to_string(),
            host: m.client_host.to_string(),
            assignment: Some(tps(&m.assignment)),
            target_assignment: Some(tps(&m.target_assignment)),
            member_epoch: Some(m.member_epoch),
        })
        .collect();
    Ok(GroupDescription {
        group_id: group.to_string(),
        kind: GroupKind::Consumer,
        state: g.group_state.to_string(),
        protocol_type: "consumer".into(),
        assignment_strategy: g.assignor_name.to_string(),
        coordinator: None,
        group_epoch: Some(g.group_epoch),
        target_assignment_epoch: Some(g.assignment_epoch),
        members,
    })
}

fn offset_fetch(
    conn: &mut AdminConnection,
    group: &str,
    assigned: &TopicPartitions,
) -> Result<BTreeMap<TopicPartition, i64>, AdminError> {
    let v = conn.require(OFFSET_FETCH)?;
    let what = format!("group '{group}'");
    let mut out = BTreeMap::new();
    if v >= 8 {
        let req = OffsetFetchRequest::default().with_groups(vec![
            offset_fetch_request::OffsetFetchRequestGroup::default()
                .with_group_id(GroupId(sb(group)))
                .with_topics(None),
        ]);
        let Response::OffsetFetch(resp) = conn.call(v, &Request::OffsetFetch(req))? else {
            return Err(unexpected("OffsetFetch"));
        };
        let Some(g) = resp.groups.iter().find(|g| g.group_id.0.as_str() == group) else {
            return Err(AdminError::new(
                ErrorKind::Protocol,
                format!("OffsetFetch returned no entry for group '{group}'"),
            ));
        };
        if g.error_code == ResponseError::GroupIdNotFound.code() {
            return Ok(out);
        }
        if g.error_code != 0 {
            return Err(broker_error("OffsetFetch", &what, g.error_code, None));
        }
        for t in &g.topics {
            for p in &t.partitions {
                if p.error_code == 0 && p.committed_offset >= 0 {
                    out.insert(
                        (t.name.0.to_string(), p.partition_index),
                        p.committed_offset,
                    );
                }
            }
        }
        return Ok(out);
    }
    let topics = if v >= 2 {
        None
    } else {
        if assigned.is_empty() {
            // v1 cannot ask for "all topics"; with nothing assigned there is nothing to ask.
            return Ok(out);
        }
        Some(
            assigned
                .iter()
                .map(|(t, ps)| {
                    offset_fetch_request::OffsetFetchRequestTopic::default()
                        .with_name(TopicName(sb(t)))
                        .with_partition_indexes(ps.clone())
                })
                .collect(),
        )
    };
    let req = OffsetFetchRequest::default()
        .with_group_id(GroupId(sb(group)))
        .with_topics(topics);
    let Response::OffsetFetch(resp) = conn.call(v, &Request::OffsetFetch(req))? else {
        return Err(unexpected("OffsetFetch"));
    };
    if v >= 2 && resp.error_code == ResponseError::GroupIdNotFound.code() {
        return Ok(out);
    }
    if v >= 2 && resp.error_code != 0 {
        return Err(broker_error("OffsetFetch", &what, resp.error_code, None));
    }
    for t in &resp.topics {
        for p in &t.partitions {
            // v1 reports group-level errors in every partition.
            if is_retriable_group_error(p.error_code) {
                return Err(broker_error("OffsetFetch", &what, p.error_code, None));
            }
            if p.error_code == 0 && p.committed_offset >= 0 {
                out.insert(
                    (t.name.0.to_string(), p.partition_index),
                    p.committed_offset,
                );
            }
        }
    }
    Ok(out)
}

// ------------------------------------------------------------------------------------------------
// Formatting (pure)
// ------------------------------------------------------------------------------------------------

/// Left-aligned columns padded to the widest cell, one space apart; no trailing spaces.
pub fn format_table(header: &[&str], rows: &[Vec<String>]) -> Vec<String> {
    let n = header.len();
    let mut widths: Vec<usize> = header.iter().map(|h| h.chars().count()).collect();
    for row in rows {
        for (i, cell) in row.iter().enumerate().take(n) {
            widths[i] = widths[i].max(cell.chars().count());
        }
    }
    let line = |cells: &mut dyn Iterator<Item = &str>| {
        let mut s = String::new();
        for (i, cell) in cells.enumerate().take(n) {
            s.push_str(cell);
            if i + 1 < n {
                let pad = widths[i] - cell.chars().count() + 1;
                s.extend(std::iter::repeat_n(' ', pad));
            }
        }
        s.truncate(s.trim_end().len());
        s
    };
    let mut out = Vec::with_capacity(rows.len() + 1);
    out.push(line(&mut header.iter().copied()));
    for row in rows {
        out.push(line(&mut row.iter().map(String::as_str)));
    }
    out
}

/// `topic(0,1,2),other(5)`, or `-` when empty.
pub fn format_assignment(tps: &TopicPartitions) -> String {
    let parts: Vec<String> = tps
        .iter()
        .filter(|(_, ps)| !ps.is_empty())
        .map(|(t, ps)| {
            let ps: Vec<String> = ps.iter().map(i32::to_string).collect();
            format!("{t}({})", ps.join(","))
        })
        .collect();
    if parts.is_empty() {
        "-".into()
    } else {
        parts.join(",")
    }
}

/// `--list` output. `groups` are shown in the order given (callers sort them).
pub fn format_list(groups: &[ListedGroup], with_state: bool) -> Vec<String> {
    if !with_state {
        return groups.iter().map(|g| g.group_id.clone()).collect();
    }
    let rows: Vec<Vec<String>> = groups
        .iter()
        .map(|g| {
            vec![
                g.group_id.clone(),
                g.state
                    .clone()
                    .filter(|s| !s.is_empty())
                    .unwrap_or_else(|| "Unknown".into()),
            ]
        })
        .collect();
    format_table(&["GROUP", "STATE"], &rows)
}

fn is_rebalancing(state: &str) -> bool {
    [
        "PreparingRebalance",
        "CompletingRebalance",
        "Assigning",
        "Reconciling",
    ]
    .iter()
    .any(|s| s.eq_ignore_ascii_case(state))
}

/// The notice kafka-consumer-groups.sh prints before a group's table (with its blank line).
fn state_notice(desc: &GroupDescription) -> Vec<String> {
    if desc.members.is_empty() || desc.state.eq_ignore_ascii_case("Empty") {
        vec![
            String::new(),
            format!("Consumer group '{}' has no active members.", desc.group_id),
        ]
    } else if is_rebalancing(&desc.state) {
        vec![
            String::new(),
            format!(
                "Warning: Consumer group '{}' is rebalancing.",
                desc.group_id
            ),
        ]
    } else {
        Vec::new()
    }
}

/// Every partition the offsets view shows: those with a committed offset or assigned to a member.
pub fn offsets_view_partitions(
    desc: &GroupDescription,
    committed: &BTreeMap<TopicPartition, i64>,
) -> BTreeSet<TopicPartition> {
    let mut keys: BTreeSet<TopicPartition> = committed.keys().cloned().collect();
    for m in &desc.members {
        for (t, ps) in m.assignment.iter().flatten() {
            keys.extend(ps.iter().map(|p| (t.clone(), *p)));
        }
    }
    keys
}

/// `--describe` (offsets view).
pub fn format_offsets(
    desc: &GroupDescription,
    committed: &BTreeMap<TopicPartition, i64>,
    log_end: &BTreeMap<TopicPartition, i64>,
) -> Vec<String> {
    let mut out = state_notice(desc);
    let mut owner: BTreeMap<TopicPartition, &MemberDescription> = BTreeMap::new();
    for m in &desc.members {
        for (t, ps) in m.assignment.iter().flatten() {
            for p in ps {
                owner.entry((t.clone(), *p)).or_insert(m);
            }
        }
    }
    let keys = offsets_view_partitions(desc, committed);
    if keys.is_empty() {
        return out;
    }
    let dash = || "-".to_string();
    let rows: Vec<Vec<String>> = keys
        .iter()
        .map(|key| {
            let current = committed.get(key).copied();
            let end = log_end.get(key).copied();
            let lag = match (current, end) {
                (Some(c), Some(e)) => (e - c).to_string(),
                _ => dash(),
            };
            let m = owner.get(key);
            vec![
                desc.group_id.clone(),
                key.0.clone(),
                key.1.to_string(),
                current.map_or_else(dash, |c| c.to_string()),
                end.map_or_else(dash, |e| e.to_string()),
                lag,
                m.map_or_else(dash, |m| m.member_id.clone()),
                m.map_or_else(dash, |m| m.host.clone()),
                m.map_or_else(dash, |m| m.client_id.clone()),
            ]
        })
        .collect();
    out.push(String::new());
    out.extend(format_table(
        &[
            "GROUP",
            "TOPIC",
            "PARTITION",
            "CURRENT-OFFSET",
            "LOG-END-OFFSET",
            "LAG",
            "CONSUMER-ID",
            "HOST",
            "CLIENT-ID",
        ],
        &rows,
    ));
    out
}

fn partition_count(tps: Option<&TopicPartitions>) -> usize {
    tps.map_or(0, |t| t.values().map(Vec::len).sum())
}

fn opt_assignment(tps: Option<&TopicPartitions>) -> String {
    tps.map_or_else(|| "-".into(), format_assignment)
}

fn opt_num(n: Option<i32>) -> String {
    n.map_or_else(|| "-".into(), |n| n.to_string())
}

/// `--describe --members` (with `verbose`: assignments).
pub fn format_members(desc: &GroupDescription, verbose: bool) -> Vec<String> {
    let mut out = state_notice(desc);
    if desc.members.is_empty() {
        return out;
    }
    let mut header = vec!["GROUP", "CONSUMER-ID", "HOST", "CLIENT-ID", "#PARTITIONS"];
    match (desc.kind, verbose) {
        (GroupKind::Classic, false) => {}
        (GroupKind::Classic, true) => header.push("ASSIGNMENT"),
        (GroupKind::Consumer, false) => header.extend(["CURRENT-EPOCH", "TARGET-EPOCH"]),
        (GroupKind::Consumer, true) => header.extend([
            "CURRENT-EPOCH",
            "CURRENT-ASSIGNMENT",
            "TARGET-EPOCH",
            "TARGET-ASSIGNMENT",
        ]),
    }
    let rows: Vec<Vec<String>> = desc
        .members
        .iter()
        .map(|m| {
            let mut row = vec![
                desc.group_id.clone(),
                m.member_id.clone(),
                m.host.clone(),
                m.client_id.clone(),
                partition_count(m.assignment.as_ref()).to_string(),
            ];
            match (desc.kind, verbose) {
                (GroupKind::Classic, false) => {}
                (GroupKind::Classic, true) => row.push(opt_assignment(m.assignment.as_ref())),
                (GroupKind::Consumer, false) => {
                    row.push(opt_num(m.member_epoch));
                    row.push(opt_num(desc.target_assignment_epoch));
                }
                (GroupKind::Consumer, true) => {
                    row.push(opt_num(m.member_epoch));
                    row.push(opt_assignment(m.assignment.as_ref()));
                    row.push(opt_num(desc.target_assignment_epoch));
                    row.push(opt_assignment(m.target_assignment.as_ref()));
                }
            }
            row
        })
        .collect();
    out.push(String::new());
    out.extend(format_table(&header, &rows));
    out
}

/// `--describe --state`.
pub fn format_state(desc: &GroupDescription) -> Vec<String> {
    let mut out = state_notice(desc);
    let coordinator = desc
        .coordinator
        .as_ref()
        .map_or_else(|| "-".into(), |n| format!("{} ({})", n.address(), n.id));
    let strategy = if desc.assignment_strategy.is_empty() {
        "-".to_string()
    } else {
        desc.assignment_strategy.clone()
    };
    let mut header = vec!["GROUP", "COORDINATOR (ID)", "ASSIGNMENT-STRATEGY", "STATE"];
    let mut row = vec![
        desc.group_id.clone(),
        coordinator,
        strategy,
        desc.state.clone(),
    ];
    if desc.kind == GroupKind::Consumer {
        header.extend(["GROUP-EPOCH", "TARGET-ASSIGNMENT-EPOCH"]);
        row.push(opt_num(desc.group_epoch));
        row.push(opt_num(desc.target_assignment_epoch));
    }
    header.push("#MEMBERS");
    row.push(desc.members.len().to_string());
    out.push(String::new());
    out.extend(format_table(&header, &[row]));
    out
}

/// `--delete` output: `None` = deleted, `Some(error name)` = failed.
pub fn format_delete(results: &[(String, Option<String>)]) -> Vec<String> {
    let quoted = |gs: &[&str]| {
        gs.iter()
            .map(|g| format!("'{g}'"))
            .collect::<Vec<_>>()
            .join(", ")
    };
    let ok: Vec<&str> = results
        .iter()
        .filter(|(_, e)| e.is_none())
        .map(|(g, _)| g.as_str())
        .collect();
    let failed: Vec<(&str, &str)> = results
        .iter()
        .filter_map(|(g, e)| e.as_deref().map(|e| (g.as_str(), e)))
        .collect();
    if failed.is_empty() {
        return vec![format!(
            "Deletion of requested consumer groups ({}) was successful.",
            quoted(&ok)
        )];
    }
    let mut out = vec!["Deletion of some consumer groups failed:".to_string()];
    for (g, e) in failed {
        out.push(format!("* Group '{g}' could not be deleted due to: {e}"));
    }
    if !ok.is_empty() {
        out.push(String::new());
        out.push(format!(
            "These consumer groups were deleted successfully: {}",
            quoted(&ok)
        ));
    }
    out
}

// ------------------------------------------------------------------------------------------------
// The command
// ------------------------------------------------------------------------------------------------

fn emit(out: &mut dyn Write, lines: &[String]) {
    for l in lines {
        let _ = writeln!(out, "{l}");
    }
}

fn emit_error(out: &mut dyn Write, e: &dyn fmt::Display) {
    let _ = writeln!(out, "Error: {e}");
}

/// Runs the command, writing the report to `out`; returns the process exit code (0 ok, 1 error
/// e.g. unreachable broker / unsupported API / group not found, 2 bad arguments such as
/// --describe without --group/--all-groups, or no action). --reset-offsets exits 1 when a group is
/// refused for being active, --delete-offsets when any partition failed (Kafka's tool exits 0).
pub fn run(args: &GroupsArgs, out: &mut dyn Write) -> i32 {
    let action = match validate(args) {
        Ok(a) => a,
        Err(msg) => {
            emit_error(out, &msg);
            let _ = writeln!(out, "Try 'ringleader groups --help' for usage.");
            return 2;
        }
    };
    let timeout = Duration::from_millis(args.timeout_ms);
    let mut session = match Session::connect(&args.bootstrap, timeout) {
        Ok(s) => s,
        Err(e) => {
            emit_error(out, &e);
            return 1;
        }
    };
    let code = match action {
        Action::List { state } => run_list(&mut session, state, out),
        Action::Describe {
            groups,
            view,
            verbose,
        } => run_describe(&mut session, groups, view, verbose, out),
        Action::Delete { groups } => run_delete(&mut session, groups, out),
        Action::ResetOffsets {
            groups,
            topics,
            spec,
            execute,
        } => run_reset_offsets(&mut session, groups, topics.as_deref(), &spec, execute, out),
        Action::DeleteOffsets { group, topics } => {
            run_delete_offsets(&mut session, &group, &topics, out)
        }
    };
    let _ = out.flush();
    code
}

fn run_list(session: &mut Session, with_state: bool, out: &mut dyn Write) -> i32 {
    match session.list_groups() {
        Ok(groups) => {
            let mut groups: Vec<ListedGroup> = groups
                .into_iter()
                .filter(ListedGroup::is_consumer_group)
                .collect();
            groups.sort_by(|a, b| a.group_id.cmp(&b.group_id));
            groups.dedup_by(|a, b| a.group_id == b.group_id);
            emit(out, &format_list(&groups, with_state));
            0
        }
        Err(e) => {
            emit_error(out, &e);
            1
        }
    }
}

fn resolve_selection(
    session: &mut Session,
    selection: GroupSelection,
) -> Result<Vec<String>, AdminError> {
    match selection {
        GroupSelection::Named(g) => Ok(g),
        GroupSelection::All => session.all_consumer_groups(),
    }
}

fn run_describe(
    session: &mut Session,
    selection: GroupSelection,
    view: DescribeView,
    verbose: bool,
    out: &mut dyn Write,
) -> i32 {
    let groups = match resolve_selection(session, selection) {
        Ok(g) => g,
        Err(e) => {
            emit_error(out, &e);
            return 1;
        }
    };
    let mut code = 0;
    for group in groups {
        let desc = match session.describe(&group) {
            Ok(d) => d,
            Err(e) if e.kind == ErrorKind::GroupNotFound => {
                emit_error(out, &e);
                code = 1;
                continue;
            }
            Err(e) => {
                emit_error(out, &e);
                return 1;
            }
        };
        let lines = match view {
            DescribeView::Members => format_members(&desc, verbose),
            DescribeView::State => format_state(&desc),
            DescribeView::Offsets => {
                let fetched = session.committed_offsets(&desc).and_then(|committed| {
                    let parts = offsets_view_partitions(&desc, &committed);
                    let log_end = session.log_end_offsets(&parts)?;
                    Ok((committed, log_end))
                });
                match fetched {
                    Ok((committed, log_end)) => format_offsets(&desc, &committed, &log_end),
                    Err(e) => {
                        emit_error(out, &e);
                        return 1;
                    }
                }
            }
        };
        emit(out, &lines);
    }
    code
}

fn run_delete(session: &mut Session, selection: GroupSelection, out: &mut dyn Write) -> i32 {
    let groups = match resolve_selection(session, selection) {
        Ok(g) => g,
        Err(e) => {
            emit_error(out, &e);
            return 1;
        }
    };
    if groups.is_empty() {
        let _ = writeln!(out, "No consumer groups to delete.");
        return 0;
    }
    match session.delete_groups(&groups) {
        Ok(results) => {
            emit(out, &format_delete(&results));
            if results.iter().any(|(_, e)| e.is_some()) {
                1
            } else {
                0
            }
        }
        Err(e) => {
            emit_error(out, &e);
            1
        }
    }
}

// ------------------------------------------------------------------------------------------------
// --reset-offsets and --delete-offsets
// ------------------------------------------------------------------------------------------------

/// A --topic value: `topic` (every partition) or `topic:p0,p1,...`. Messages as in Kafka's
/// `GroupOffsetsResetter.parseTopicsWithPartitions`.
pub fn parse_topic_arg(arg: &str) -> Result<(String, Option<Vec<i32>>), String> {
    if !arg.contains(':') {
        if arg.is_empty() {
            return Err("--topic needs a topic name".into());
        }
        return Ok((arg.to_string(), None));
    }
    let parts: Vec<&str> = arg.split(':').collect();
    if parts.len() != 2 || parts[0].is_empty() || parts[1].is_empty() {
        return Err(format!(
            "Invalid topic arg '{arg}', expected topic name and partitions"
        ));
    }
    let mut ps = Vec::new();
    for p in parts[1].split(',') {
        match p.parse::<i32>() {
            Ok(n) if n >= 0 => ps.push(n),
            _ => {
                return Err(format!(
                    "Invalid partition '{p}' specified in topic arg '{arg}''"
                ))
            }
        }
    }
    Ok((parts[0].to_string(), Some(ps)))
}

/// Days since 1970-01-01 of a proleptic Gregorian date.
fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = if y >= 0 { y } else { y - 399 } / 400;
    let yoe = y - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// `--to-datetime`: `YYYY-MM-DDTHH:mm:SS[.sss]` with an optional `Z` or `+hh:mm`/`-hh:mm`
/// (`+hhmm` too). Without a zone the time is taken as UTC. Returns epoch milliseconds.
pub fn parse_datetime(text: &str) -> Result<i64, String> {
    let bad =
        || format!("Error parsing timestamp '{text}': expected format yyyy-MM-dd'T'HH:mm:ss.SSS");
    let b = text.as_bytes();
    if b.len() < 19
        || b[4] != b'-'
        || b[7] != b'-'
        || b[10] != b'T'
        || b[13] != b':'
        || b[16] != b':'
    {
        return Err(bad());
    }
    let num = |r: std::ops::Range<usize>| -> Result<i64, String> {
        let s = text.get(r).ok_or_else(bad)?;
        if s.is_empty() || !s.bytes().all(|c| c.is_ascii_digit()) {
            return Err(bad());
        }
        s.parse::<i64>().map_err(|_| bad())
    };
    let (y, mo, d, h, mi, se) = (
        num(0..4)?,
        num(5..7)?,
        num(8..10)?,
        num(11..13)?,
        num(14..16)?,
        num(17..19)?,
    );
    if !(1..=12).contains(&mo) || !(1..=31).contains(&d) || h > 23 || mi > 59 || se > 59 {
        return Err(bad());
    }
    let mut rest = &text[19..];
    let mut millis = 0;
    if let Some(r) = rest.strip_prefix('.') {
        let digits = r.bytes().take_while(u8::is_ascii_digit).count();
        if digits == 0 || digits > 9 {
            return Err(bad());
        }
        let frac = &r[..digits];
        let padded = format!("{frac:0<3}");
        millis = padded[..3].parse::<i64>().map_err(|_| bad())?;
        rest = &r[digits..];
    }
    let offset_min = match rest {
        "" | "Z" => 0,
        z if z.starts_with('+') || z.starts_with('-') => {
            let sign = if z.starts_with('-') { -1 } else { 1 };
            let digits: String = z[1..].chars().filter(|c| *c != ':').collect();
            if digits.len() != 4 || !digits.bytes().all(|c| c.is_ascii_digit()) {
                return Err(bad());
            }
            let hh: i64 = digits[..2].parse().map_err(|_| bad())?;
            let mm: i64 = digits[2..].parse().map_err(|_| bad())?;
            sign * (hh * 60 + mm)
        }
        _ => return Err(bad()),
    };
    let days = days_from_civil(y, mo, d);
    Ok(((days * 24 + h) * 60 + mi) * 60_000 + se * 1000 + millis - offset_min * 60_000)
}

/// `--by-duration`: an ISO-8601 duration as Java's `Duration.parse` reads it
/// (`[-]PnDTnHnMn.nS`). Returns milliseconds.
pub fn parse_duration_ms(text: &str) -> Result<i64, String> {
    let bad = || format!("Error parsing duration '{text}': expected format PnDTnHnMnS");
    let upper = text.to_ascii_uppercase();
    let (neg, rest) = match upper.strip_prefix('-') {
        Some(r) => (true, r),
        None => (false, upper.strip_prefix('+').unwrap_or(&upper)),
    };
    let rest = rest.strip_prefix('P').ok_or_else(bad)?;
    let (date, time) = match rest.split_once('T') {
        Some((d, t)) => {
            if t.is_empty() {
                return Err(bad());
            }
            (d, Some(t))
        }
        None => (rest, None),
    };
    let mut total: f64 = 0.0;
    let mut any = false;
    let mut take = |part: &str, units: &[(char, f64)]| -> Result<(), String> {
        let mut cur = String::new();
        let mut next_unit = 0;
        for ch in part.chars() {
            if ch.is_ascii_digit() || ch == '.' || ch == '-' || ch == '+' {
                cur.push(ch);
                continue;
            }
            let idx = units[next_unit..]
                .iter()
                .position(|(u, _)| *u == ch)
                .ok_or_else(bad)?
                + next_unit;
            if cur.is_empty() || (cur.contains('.') && ch != 'S') {
                return Err(bad());
            }
            let n: f64 = cur.parse().map_err(|_| bad())?;
            total += n * units[idx].1;
            any = true;
            cur.clear();
            next_unit = idx + 1;
        }
        if cur.is_empty() {
            Ok(())
        } else {
            Err(bad())
        }
    };
    take(date, &[('D', 86_400_000.0)])?;
    if let Some(t) = time {
        take(t, &[('H', 3_600_000.0), ('M', 60_000.0), ('S', 1000.0)])?;
    }
    if !any || !total.is_finite() || total.abs() > 1e17 {
        return Err(bad());
    }
    let ms = total.round() as i64;
    Ok(if neg { -ms } else { ms })
}

/// Kafka's exception class for an error code, as its admin client reports it.
fn exception_name(code: i16) -> String {
    let Some(e) = ResponseError::try_from_code(code) else {
        return "NONE".into();
    };
    let class = match e {
        ResponseError::NonEmptyGroup => "GroupNotEmptyException".to_string(),
        ResponseError::GroupAuthorizationFailed => "GroupAuthorizationException".to_string(),
        ResponseError::TopicAuthorizationFailed => "TopicAuthorizationException".to_string(),
        ResponseError::Unknown(_) => "UnknownServerException".to_string(),
        other => format!("{other:?}Exception"),
    };
    format!(
        "org.apache.kafka.common.errors.{class}: {}",
        error_message(code)
    )
}

/// Kafka's message for an error code (its `Errors.message()`) for the errors these commands
/// meet; the error's name otherwise.
fn error_message(code: i16) -> String {
    use ResponseError as E;
    let Some(e) = E::try_from_code(code) else {
        return String::new();
    };
    match e {
        E::UnknownServerError => {
            "The server experienced an unexpected error when processing the request."
        }
        E::UnknownTopicOrPartition => "This server does not host this topic-partition.",
        E::CoordinatorLoadInProgress => {
            "The coordinator is loading and hence can't process requests."
        }
        E::CoordinatorNotAvailable => "The coordinator is not available.",
        E::NotCoordinator => "This is not the correct coordinator.",
        E::InvalidTopicException => {
            "The request attempted to perform an operation on an invalid topic."
        }
        E::InvalidGroupId => "The configured groupId is invalid.",
        E::TopicAuthorizationFailed => "Topic authorization failed.",
        E::GroupAuthorizationFailed => "Group authorization failed.",
        E::NonEmptyGroup => "The group is not empty.",
        E::GroupIdNotFound => "The group id does not exist.",
        E::GroupSubscribedToTopic => {
            "Deleting offsets of a topic is forbidden while the consumer group is actively subscribed to it."
        }
        _ => return error_name(code),
    }
    .to_string()
}

/// `--reset-offsets` output (Kafka's `printOffsetsToReset`): a blank line, then the table; the
/// header only when some group was asked about. Rows sorted by topic, partition.
pub fn format_reset(results: &[(String, BTreeMap<TopicPartition, i64>)]) -> Vec<String> {
    let group_w = results
        .iter()
        .map(|(g, _)| g.chars().count())
        .max()
        .unwrap_or(0)
        .max(15);
    let topic_w = results
        .iter()
        .flat_map(|(_, m)| m.keys().map(|(t, _)| t.chars().count()))
        .max()
        .unwrap_or(0)
        .max(15);
    let mut out = vec![String::new()];
    if results.is_empty() {
        return out;
    }
    out.push(format!(
        "{:<group_w$} {:<topic_w$} {:<10} NEW-OFFSET",
        "GROUP", "TOPIC", "PARTITION"
    ));
    for (g, m) in results {
        for ((t, p), o) in m {
            out.push(format!("{g:<group_w$} {t:<topic_w$} {p:<10} {o}"));
        }
    }
    out
}

/// `--delete-offsets` output, as Kafka prints it (including its padded STATUS column).
/// `partitions`: (topic, partition or -1 for an unknown topic) with `None` = deleted or
/// `Some(error code)`.
pub fn format_delete_offsets(
    group: &str,
    top_level: i16,
    partitions: &[(TopicPartition, Option<i16>)],
) -> Vec<String> {
    let mut out = Vec::new();
    let err = |out: &mut Vec<String>, m: String| {
        out.push(String::new());
        out.push(format!("Error: {m}"));
    };
    match ResponseError::try_from_code(top_level) {
        None => out.push(format!(
            "Request succeeded for deleting offsets from group {group}."
        )),
        Some(
            ResponseError::InvalidGroupId
            | ResponseError::GroupIdNotFound
            | ResponseError::GroupAuthorizationFailed
            | ResponseError::NonEmptyGroup,
        ) => err(&mut out, error_message(top_level)),
        Some(
            ResponseError::GroupSubscribedToTopic
            | ResponseError::TopicAuthorizationFailed
            | ResponseError::UnknownTopicOrPartition,
        ) => err(
            &mut out,
            "Encountered some partition-level error, see the follow-up details.".into(),
        ),
        Some(_) => err(
            &mut out,
            format!("Encountered some unknown error: {}", error_name(top_level)),
        ),
    }
    let topic_w = partitions
        .iter()
        .map(|((t, _), _)| t.chars().count())
        .max()
        .unwrap_or(0)
        .max(15);
    out.push(String::new());
    out.push(format!(
        "{:<topic_w$} {:<10} {:<15}",
        "TOPIC", "PARTITION", "STATUS"
    ));
    let mut rows: Vec<&(TopicPartition, Option<i16>)> = partitions.iter().collect();
    // Kafka sorts on topic + partition concatenated as a string.
    rows.sort_by_key(|((t, p), _)| format!("{t}{p}"));
    for ((t, p), e) in rows {
        let part = if *p >= 0 { p.to_string() } else { "-".into() };
        let status = match e {
            None => "Successful".to_string(),
            Some(c) => format!("Error: {}", exception_name(*c)),
        };
        out.push(format!("{t:<topic_w$} {part:<10} {status:<15}"));
    }
    out
}

impl Session {
    /// Partition counts of topics (Metadata). `Err(code)` for a topic the broker reports an
    /// error for.
    fn topic_partitions(
        &mut self,
        topics: &[String],
    ) -> Result<BTreeMap<String, Result<Vec<i32>, i16>>, AdminError> {
        let mut out = BTreeMap::new();
        if topics.is_empty() {
            return Ok(out);
        }
        let v = self.bootstrap.require(METADATA)?;
        let mut req = MetadataRequest::default().with_topics(Some(
            topics
                .iter()
                .map(|t| {
                    metadata_request::MetadataRequestTopic::default()
                        .with_name(Some(TopicName(sb(t))))
                })
                .collect(),
        ));
        if v >= 4 {
            req.allow_auto_topic_creation = false;
        }
        let Response::Metadata(resp) = self.bootstrap.call(v, &Request::Metadata(req))? else {
            return Err(unexpected("Metadata"));
        };
        for t in topics {
            let entry = resp
                .topics
                .iter()
                .find(|rt| rt.name.as_ref().map(|n| n.0.as_str()) == Some(t.as_str()));
            let r = match entry {
                None => Err(ResponseError::UnknownTopicOrPartition.code()),
                Some(rt) if rt.error_code != 0 => Err(rt.error_code),
                Some(rt) => {
                    let mut ps: Vec<i32> =
                        rt.partitions.iter().map(|p| p.partition_index).collect();
                    ps.sort_unstable();
                    Ok(ps)
                }
            };
            out.insert(t.clone(), r);
        }
        Ok(out)
    }

    /// ListOffsets at `timestamp` (-2 earliest, -1 latest, or epoch ms) asked of the bootstrap
    /// broker. Partitions answered with an error are left out; -1 offsets are kept.
    fn list_offsets(
        &mut self,
        partitions: &BTreeSet<TopicPartition>,
        timestamp: i64,
    ) -> Result<BTreeMap<TopicPartition, i64>, AdminError> {
        let mut out = BTreeMap::new();
        if partitions.is_empty() {
            return Ok(out);
        }
        let v = self.bootstrap.require(LIST_OFFSETS)?;
        let mut by_topic: BTreeMap<&str, Vec<i32>> = BTreeMap::new();
        for (t, p) in partitions {
            by_topic.entry(t.as_str()).or_default().push(*p);
        }
        let topics = by_topic
            .into_iter()
            .map(|(t, ps)| {
                list_offsets_request::ListOffsetsTopic::default()
                    .with_name(TopicName(sb(t)))
                    .with_partitions(
                        ps.into_iter()
                            .map(|p| {
                                list_offsets_request::ListOffsetsPartition::default()
                                    .with_partition_index(p)
                                    .with_timestamp(timestamp)
                            })
                            .collect(),
                    )
            })
            .collect();
        let mut req = ListOffsetsRequest::default()
            .with_replica_id(BrokerId(-1))
            .with_topics(topics);
        if v >= 10 {
            req.timeout_ms = self.timeout.as_millis().min(i32::MAX as u128) as i32;
        }
        let Response::ListOffsets(resp) = self.bootstrap.call(v, &Request::ListOffsets(req))?
        else {
            return Err(unexpected("ListOffsets"));
        };
        for t in &resp.topics {
            for p in &t.partitions {
                if p.error_code == 0 {
                    out.insert((t.name.0.to_string(), p.partition_index), p.offset);
                }
            }
        }
        Ok(out)
    }

    /// Committed offsets of `group` (OffsetFetch for all topics).
    fn group_offsets(&mut self, group: &str) -> Result<BTreeMap<TopicPartition, i64>, AdminError> {
        self.retrying(|s| {
            let node = s.coordinator(group)?;
            let conn = s.conn_for(&node)?;
            let result = offset_fetch(conn, group, &TopicPartitions::new());
            if matches!(&result, Err(e) if e.kind == ErrorKind::Retriable) {
                s.coordinators.remove(group);
            }
            result
        })
    }

    /// Commit `offsets` for `group` as an admin (generation -1, no member id).
    fn commit_offsets(
        &mut self,
        group: &str,
        offsets: &BTreeMap<TopicPartition, i64>,
    ) -> Result<(), AdminError> {
        let mut by_topic: BTreeMap<&str, Vec<(i32, i64)>> = BTreeMap::new();
        for ((t, p), o) in offsets {
            by_topic.entry(t.as_str()).or_default().push((*p, *o));
        }
        self.retrying(|s| {
            let node = s.coordinator(group)?;
            let conn = s.conn_for(&node)?;
            let v = conn.require(OFFSET_COMMIT)?;
            let mut req = OffsetCommitRequest::default()
                .with_group_id(GroupId(sb(group)))
                .with_generation_id_or_member_epoch(-1)
                .with_member_id(sb(""))
                .with_topics(
                    by_topic
                        .iter()
                        .map(|(t, ps)| {
                            offset_commit_request::OffsetCommitRequestTopic::default()
                                .with_name(TopicName(sb(t)))
                                .with_partitions(
                                    ps.iter()
                                        .map(|(p, o)| {
                                            offset_commit_request::OffsetCommitRequestPartition::default()
                                                .with_partition_index(*p)
                                                .with_committed_offset(*o)
                                                .with_committed_metadata(Some(sb("")))
                                        })
                                        .collect(),
                                )
                        })
                        .collect(),
                );
            if (2..=4).contains(&v) {
                req.retention_time_ms = -1;
            }
            let Response::OffsetCommit(resp) = conn.call(v, &Request::OffsetCommit(req))? else {
                return Err(unexpected("OffsetCommit"));
            };
            for t in &resp.topics {
                for p in &t.partitions {
                    if p.error_code != 0 {
                        if is_retriable_group_error(p.error_code) {
                            s.coordinators.remove(group);
                        }
                        return Err(broker_error(
                            "OffsetCommit",
                            &format!("group '{group}' ({}-{})", t.name.0, p.partition_index),
                            p.error_code,
                            None,
                        ));
                    }
                }
            }
            Ok(())
        })
    }

    /// OffsetDelete: the top-level error code and each partition's error code.
    fn delete_offsets(
        &mut self,
        group: &str,
        partitions: &BTreeSet<TopicPartition>,
    ) -> Result<(i16, BTreeMap<TopicPartition, i16>), AdminError> {
        let mut by_topic: BTreeMap<&str, Vec<i32>> = BTreeMap::new();
        for (t, p) in partitions {
            by_topic.entry(t.as_str()).or_default().push(*p);
        }
        self.retrying(|s| {
            let node = s.coordinator(group)?;
            let conn = s.conn_for(&node)?;
            let v = conn.require(OFFSET_DELETE)?;
            let req = OffsetDeleteRequest::default()
                .with_group_id(GroupId(sb(group)))
                .with_topics(
                    by_topic
                        .iter()
                        .map(|(t, ps)| {
                            offset_delete_request::OffsetDeleteRequestTopic::default()
                                .with_name(TopicName(sb(t)))
                                .with_partitions(
                                    ps.iter()
                                        .map(|p| {
                                            offset_delete_request::OffsetDeleteRequestPartition::default()
                                                .with_partition_index(*p)
                                        })
                                        .collect(),
                                )
                        })
                        .collect(),
                );
            let Response::OffsetDelete(resp) = conn.call(v, &Request::OffsetDelete(req))? else {
                return Err(unexpected("OffsetDelete"));
            };
            if is_retriable_group_error(resp.error_code) {
                s.coordinators.remove(group);
                return Err(broker_error(
                    "OffsetDelete",
                    &format!("group '{group}'"),
                    resp.error_code,
                    None,
                ));
            }
            let mut per = BTreeMap::new();
            for t in &resp.topics {
                for p in &t.partitions {
                    per.insert((t.name.0.to_string(), p.partition_index), p.error_code);
                }
            }
            Ok((resp.error_code, per))
        })
    }

    /// The partitions named by --topic values: explicit ones as given, bare topics expanded
    /// with Metadata. Unknown bare topics are returned apart with their error code.
    #[allow(clippy::type_complexity)]
    fn resolve_topics(
        &mut self,
        args: &[String],
    ) -> Result<(BTreeSet<TopicPartition>, Vec<(String, i16)>), AdminError> {
        let mut parts = BTreeSet::new();
        let mut bare = Vec::new();
        for a in args {
            let (t, ps) =
                parse_topic_arg(a).map_err(|m| AdminError::new(ErrorKind::Protocol, m))?;
            match ps {
                Some(ps) => parts.extend(ps.into_iter().map(|p| (t.clone(), p))),
                None => {
                    if !bare.contains(&t) {
                        bare.push(t)
                    }
                }
            }
        }
        let mut failed = Vec::new();
        for (t, r) in self.topic_partitions(&bare)? {
            match r {
                Ok(ps) => parts.extend(ps.into_iter().map(|p| (t.clone(), p))),
                Err(code) => failed.push((t, code)),
            }
        }
        Ok((parts, failed))
    }

    /// The new offsets for one inactive group.
    fn prepare_reset(
        &mut self,
        group: &str,
        topics: Option<&[String]>,
        spec: &ResetSpec,
        out: &mut dyn Write,
    ) -> Result<BTreeMap<TopicPartition, i64>, AdminError> {
        let committed = match (topics, spec) {
            (None, _) | (_, ResetSpec::ShiftBy(_) | ResetSpec::Current) => {
                self.group_offsets(group)?
            }
            _ => BTreeMap::new(),
        };
        let parts: BTreeSet<TopicPartition> = match topics {
            None => committed.keys().cloned().collect(),
            Some(args) => {
                let (parts, failed) = self.resolve_topics(args)?;
                if let Some((t, code)) = failed.first() {
                    return Err(AdminError {
                        kind: ErrorKind::Broker,
                        message: format!(
                            "Executing consumer group command failed due to {} (topic '{t}')",
                            exception_name(*code)
                        ),
                        code: Some(*code),
                    });
                }
                parts
            }
        };
        let lookup = |s: &mut Session,
                      ts: i64,
                      what: &str|
         -> Result<BTreeMap<TopicPartition, i64>, AdminError> {
            let got = s.list_offsets(&parts, ts)?;
            for tp in &parts {
                if got.get(tp).is_none_or(|o| ts < 0 && *o < 0) {
                    return Err(AdminError::new(
                        ErrorKind::Broker,
                        format!(
                            "Error getting {what} offset of topic partition: {}-{}",
                            tp.0, tp.1
                        ),
                    ));
                }
            }
            Ok(got)
        };
        let clamp = |s: &mut Session,
                     wanted: BTreeMap<TopicPartition, i64>|
         -> Result<BTreeMap<TopicPartition, i64>, AdminError> {
            let earliest = lookup(s, -2, "starting")?;
            let latest = lookup(s, -1, "ending")?;
            Ok(wanted
                .into_iter()
                .map(|(tp, o)| {
                    let (lo, hi) = (earliest[&tp], latest[&tp]);
                    let o = if o > hi {
                        hi
                    } else if o < lo {
                        lo
                    } else {
                        o
                    };
                    (tp, o)
                })
                .collect())
        };
        let by_time = |s: &mut Session,
                       ts: i64,
                       out: &mut dyn Write|
         -> Result<BTreeMap<TopicPartition, i64>, AdminError> {
            let got = s.list_offsets(&parts, ts)?;
            let mut res = BTreeMap::new();
            let mut empty = BTreeSet::new();
            for tp in &parts {
                match got.get(tp) {
                    Some(o) if *o >= 0 => {
                        res.insert(tp.clone(), *o);
                    }
                    _ => {
                        let _ = writeln!(
                            out,
                            "\nWarn: Partition {} from topic {} is empty. Falling back to latest known offset.",
                            tp.1, tp.0
                        );
                        empty.insert(tp.clone());
                    }
                }
            }
            if !empty.is_empty() {
                let latest = s.list_offsets(&empty, -1)?;
                for tp in empty {
                    match latest.get(&tp) {
                        Some(o) if *o >= 0 => {
                            res.insert(tp, *o);
                        }
                        _ => {
                            return Err(AdminError::new(
                                ErrorKind::Broker,
                                format!(
                                    "Error getting offset by timestamp of topic partition: {}-{}",
                                    tp.0, tp.1
                                ),
                            ))
                        }
                    }
                }
            }
            Ok(res)
        };
        match spec {
            ResetSpec::Earliest => lookup(self, -2, "starting"),
            ResetSpec::Latest => lookup(self, -1, "ending"),
            ResetSpec::Offset(o) => clamp(self, parts.iter().map(|tp| (tp.clone(), *o)).collect()),
            ResetSpec::ShiftBy(n) => {
                let mut wanted = BTreeMap::new();
                for tp in &parts {
                    let Some(c) = committed.get(tp) else {
                        return Err(AdminError::new(
                            ErrorKind::Broker,
                            format!(
                                "Cannot shift offset for partition {}-{} since there is no current committed offset",
                                tp.0, tp.1
                            ),
                        ));
                    };
                    wanted.insert(tp.clone(), c.saturating_add(*n));
                }
                clamp(self, wanted)
            }
            ResetSpec::Timestamp(ts) => by_time(self, *ts, out),
            ResetSpec::Duration(ms) => {
                let now = std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .map(|d| d.as_millis() as i64)
                    .unwrap_or(0);
                by_time(self, now.saturating_sub(*ms), out)
            }
            ResetSpec::Current => {
                let mut res = BTreeMap::new();
                let missing: BTreeSet<TopicPartition> = parts
                    .iter()
                    .filter(|tp| !committed.contains_key(*tp))
                    .cloned()
                    .collect();
                for tp in &parts {
                    if let Some(c) = committed.get(tp) {
                        res.insert(tp.clone(), *c);
                    }
                }
                let latest = self.list_offsets(&missing, -1)?;
                for tp in missing {
                    match latest.get(&tp) {
                        Some(o) if *o >= 0 => {
                            res.insert(tp, *o);
                        }
                        _ => {
                            return Err(AdminError::new(
                                ErrorKind::Broker,
                                format!(
                                    "Error getting ending offset of topic partition: {}-{}",
                                    tp.0, tp.1
                                ),
                            ))
                        }
                    }
                }
                Ok(res)
            }
        }
    }
}

fn run_reset_offsets(
    session: &mut Session,
    selection: GroupSelection,
    topics: Option<&[String]>,
    spec: &ResetSpec,
    execute: bool,
    out: &mut dyn Write,
) -> i32 {
    let groups = match resolve_selection(session, selection) {
        Ok(g) => g,
        Err(e) => {
            emit_error(out, &e);
            return 1;
        }
    };
    let mut code = 0;
    let mut results = Vec::new();
    for group in groups {
        let state = match session.describe(&group) {
            Ok(d) => d.state,
            Err(e) if e.kind == ErrorKind::GroupNotFound => "Dead".to_string(),
            Err(e) => {
                emit_error(out, &e);
                return 1;
            }
        };
        if state != "Empty" && state != "Dead" {
            let _ = writeln!(
                out,
                "\nError: Assignments can only be reset if the group '{group}' is inactive, but the current state is {state}."
            );
            code = 1;
            results.push((group, BTreeMap::new()));
            continue;
        }
        let prepared = match session.prepare_reset(&group, topics, spec, out) {
            Ok(p) => p,
            Err(e) => {
                emit_error(out, &e);
                return 1;
            }
        };
        if execute && !prepared.is_empty() {
            if let Err(e) = session.commit_offsets(&group, &prepared) {
                emit_error(out, &e);
                return 1;
            }
        }
        results.push((group, prepared));
    }
    emit(out, &format_reset(&results));
    code
}

fn run_delete_offsets(
    session: &mut Session,
    group: &str,
    topics: &[String],
    out: &mut dyn Write,
) -> i32 {
    let (parts, failed) = match session.resolve_topics(topics) {
        Ok(r) => r,
        Err(e) => {
            emit_error(out, &e);
            return 1;
        }
    };
    let mut rows: Vec<(TopicPartition, Option<i16>)> = failed
        .iter()
        .map(|(t, c)| ((t.clone(), -1), Some(*c)))
        .collect();
    let mut top = 0;
    if !parts.is_empty() {
        let (top_level, per) = match session.delete_offsets(group, &parts) {
            Ok(r) => r,
            Err(e) => {
                emit_error(out, &e);
                return 1;
            }
        };
        // Like the admin client: the request fails with the top-level error, else with the
        // first partition's error; a top-level error fails every partition.
        top = if top_level != 0 {
            top_level
        } else {
            parts
                .iter()
                .filter_map(|tp| per.get(tp).copied())
                .find(|c| *c != 0)
                .unwrap_or(0)
        };
        for tp in &parts {
            let e = if top_level != 0 {
                Some(top_level)
            } else {
                match per.get(tp) {
                    None => Some(ResponseError::UnknownServerError.code()),
                    Some(0) => None,
                    Some(c) => Some(*c),
                }
            };
            rows.push((tp.clone(), e));
        }
    }
    emit(out, &format_delete_offsets(group, top, &rows));
    if top != 0 || !failed.is_empty() {
        1
    } else {
        0
    }
}

// ------------------------------------------------------------------------------------------------
// Tests
// ------------------------------------------------------------------------------------------------

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser, Debug)]
    struct Cli {
        #[command(flatten)]
        args: GroupsArgs,
    }

    fn parse(argv: &[&str]) -> GroupsArgs {
        Cli::try_parse_from(std::iter::once("groups").chain(argv.iter().copied()))
            .unwrap()
            .args
    }

    fn tps(entries: &[(&str, &[i32])]) -> TopicPartitions {
        entries
            .iter()
            .map(|(t, ps)| (t.to_string(), ps.to_vec()))
            .collect()
    }

    fn member(id: &str, client: &str, assignment: Option<TopicPartitions>) -> MemberDescription {
        MemberDescription {
            member_id: id.into(),
            group_instance_id: None,
            client_id: client.into(),
            host: "/127.0.0.1".into(),
            assignment,
            target_assignment: None,
            member_epoch: None,
        }
    }

    /// Reference §10 Example 2 (classic): Stable, range, A orders 0-2, B orders 3-5.
    fn classic_example() -> GroupDescription {
        GroupDescription {
            group_id: "g-classic".into(),
            kind: GroupKind::Classic,
            state: "Stable".into(),
            protocol_type: "consumer".into(),
            assignment_strategy: "range".into(),
            coordinator: Some(Node {
                id: 1,
                host: "localhost".into(),
                port: 9092,
            }),
            group_epoch: None,
            target_assignment_epoch: None,
            members: vec![
                member("A-1", "A", Some(tps(&[("orders", &[0, 1, 2])]))),
                member("B-2", "B", Some(tps(&[("orders", &[3, 4, 5])]))),
            ],
        }
    }

    /// Reference §10 Example 2 (consumer): Stable, uniform, epochs 3/3, A 0-2, B 3-5.
    fn consumer_example() -> GroupDescription {
        let mut a = member("A-id", "A", Some(tps(&[("orders", &[0, 1, 2])])));
        a.target_assignment = a.assignment.clone();
        a.member_epoch = Some(3);
        let mut b = member("B-id", "B", Some(tps(&[("orders", &[3, 4, 5])])));
        b.target_assignment = b.assignment.clone();
        b.member_epoch = Some(3);
        GroupDescription {
            group_id: "g-consumer".into(),
            kind: GroupKind::Consumer,
            state: "Stable".into(),
            protocol_type: "consumer".into(),
            assignment_strategy: "uniform".into(),
            coordinator: Some(Node {
                id: 1,
                host: "localhost".into(),
                port: 9092,
            }),
            group_epoch: Some(3),
            target_assignment_epoch: Some(3),
            members: vec![a, b],
        }
    }

    /// Reference §10 Example 4: orders 0..5 committed at 10, 9, 13, 6, 14, 8, lag 0.
    fn example_offsets() -> (BTreeMap<TopicPartition, i64>, BTreeMap<TopicPartition, i64>) {
        let committed: BTreeMap<_, _> = [10, 9, 13, 6, 14, 8]
            .iter()
            .enumerate()
            .map(|(p, o)| (("orders".to_string(), p as i32), *o as i64))
            .collect();
        (committed.clone(), committed)
    }

    #[test]
    fn offsets_view_of_the_classic_example() {
        let (committed, log_end) = example_offsets();
        let lines = format_offsets(&classic_example(), &committed, &log_end);
        let expected = [
            "",
            "GROUP     TOPIC  PARTITION CURRENT-OFFSET LOG-END-OFFSET LAG CONSUMER-ID HOST       CLIENT-ID",
            "g-classic orders 0         10             10             0   A-1         /127.0.0.1 A",
            "g-classic orders 1         9              9              0   A-1         /127.0.0.1 A",
            "g-classic orders 2         13             13             0   A-1         /127.0.0.1 A",
            "g-classic orders 3         6              6              0   B-2         /127.0.0.1 B",
            "g-classic orders 4         14             14             0   B-2         /127.0.0.1 B",
            "g-classic orders 5         8              8              0   B-2         /127.0.0.1 B",
        ];
        assert_eq!(lines, expected);
    }

    #[test]
    fn offsets_view_dashes_and_unassigned_commits() {
        let mut desc = classic_example();
        desc.members[1].assignment = None; // B's assignment bytes did not decode
        let committed: BTreeMap<_, _> = [(("orders".to_string(), 0), 5), (("other".into(), 7), 1)]
            .into_iter()
            .collect();
        let log_end: BTreeMap<_, _> = [(("orders".to_string(), 0), 12)].into_iter().collect();
        let lines = format_offsets(&desc, &committed, &log_end);
        assert_eq!(lines[0], "");
        let cells: Vec<Vec<&str>> = lines[2..]
            .iter()
            .map(|l| l.split_whitespace().collect())
            .collect();
        assert_eq!(
            cells,
            vec![
                vec![
                    "g-classic",
                    "orders",
                    "0",
                    "5",
                    "12",
                    "7",
                    "A-1",
                    "/127.0.0.1",
                    "A"
                ],
                vec![
                    "g-classic",
                    "orders",
                    "1",
                    "-",
                    "-",
                    "-",
                    "A-1",
                    "/127.0.0.1",
                    "A"
                ],
                vec![
                    "g-classic",
                    "orders",
                    "2",
                    "-",
                    "-",
                    "-",
                    "A-1",
                    "/127.0.0.1",
                    "A"
                ],
                vec!["g-classic", "other", "7", "1", "-", "-", "-", "-", "-"],
            ]
        );
    }

    #[test]
    fn empty_group_says_no_active_members_before_the_table() {
        let mut desc = classic_example();
        desc.state = "Empty".into();
        desc.members.clear();
        let (committed, log_end) = example_offsets();
        let lines = format_offsets(&desc, &committed, &log_end);
        assert_eq!(lines[0], "");
        assert_eq!(
            lines[1],
            "Consumer group 'g-classic' has no active members."
        );
        assert_eq!(lines[2], "");
        assert!(lines[3].starts_with("GROUP "));
        assert_eq!(lines.len(), 4 + 6);
        assert!(lines[4].contains(" - "), "{}", lines[4]);
        // Nothing committed: only the notice.
        let lines = format_offsets(&desc, &BTreeMap::new(), &BTreeMap::new());
        assert_eq!(
            lines,
            ["", "Consumer group 'g-classic' has no active members."]
        );
        // Members and state views agree.
        assert_eq!(format_members(&desc, true).len(), 2);
        let state = format_state(&desc);
        assert_eq!(
            state[1],
            "Consumer group 'g-classic' has no active members."
        );
        assert!(state.last().unwrap().ends_with(" Empty 0"), "{state:?}");
    }

    #[test]
    fn rebalancing_group_gets_a_warning() {
        let mut desc = classic_example();
        desc.state = "PreparingRebalance".into();
        let lines = format_members(&desc, false);
        assert_eq!(
            lines[1],
            "Warning: Consumer group 'g-classic' is rebalancing."
        );
    }

    #[test]
    fn members_view_classic() {
        let desc = classic_example();
        assert_eq!(
            format_members(&desc, false),
            [
                "",
                "GROUP     CONSUMER-ID HOST       CLIENT-ID #PARTITIONS",
                "g-classic A-1         /127.0.0.1 A         3",
                "g-classic B-2         /127.0.0.1 B         3",
            ]
        );
        assert_eq!(
            format_members(&desc, true),
            [
                "",
                "GROUP     CONSUMER-ID HOST       CLIENT-ID #PARTITIONS ASSIGNMENT",
                "g-classic A-1         /127.0.0.1 A         3           orders(0,1,2)",
                "g-classic B-2         /127.0.0.1 B         3           orders(3,4,5)",
            ]
        );
    }

    #[test]
    fn members_view_consumer() {
        let desc = consumer_example();
        assert_eq!(
            format_members(&desc, false),
            [
                "",
                "GROUP      CONSUMER-ID HOST       CLIENT-ID #PARTITIONS CURRENT-EPOCH TARGET-EPOCH",
                "g-consumer A-id        /127.0.0.1 A         3           3             3",
                "g-consumer B-id        /127.0.0.1 B         3           3             3",
            ]
        );
        assert_eq!(
            format_members(&desc, true),
            [
                "",
                "GROUP      CONSUMER-ID HOST       CLIENT-ID #PARTITIONS CURRENT-EPOCH CURRENT-ASSIGNMENT TARGET-EPOCH TARGET-ASSIGNMENT",
                "g-consumer A-id        /127.0.0.1 A         3           3             orders(0,1,2)      3            orders(0,1,2)",
                "g-consumer B-id        /127.0.0.1 B         3           3             orders(3,4,5)      3            orders(3,4,5)",
            ]
        );
    }

    #[test]
    fn state_views() {
        assert_eq!(
            format_state(&classic_example()),
            [
                "",
                "GROUP     COORDINATOR (ID)   ASSIGNMENT-STRATEGY STATE  #MEMBERS",
                "g-classic localhost:9092 (1) range               Stable 2",
            ]
        );
        assert_eq!(
            format_state(&consumer_example()),
            [
                "",
                "GROUP      COORDINATOR (ID)   ASSIGNMENT-STRATEGY STATE  GROUP-EPOCH TARGET-ASSIGNMENT-EPOCH #MEMBERS",
                "g-consumer localhost:9092 (1) uniform             Stable 3           3                       2",
            ]
        );
    }

    #[test]
    fn list_and_delete_formats() {
        let g = |id: &str, state: Option<&str>| ListedGroup {
            group_id: id.into(),
            protocol_type: "consumer".into(),
            state: state.map(Into::into),
            group_type: None,
        };
        let groups = [g("alpha", Some("Stable")), g("a-much-longer-group", None)];
        assert_eq!(
            format_list(&groups, false),
            ["alpha", "a-much-longer-group"]
        );
        assert_eq!(
            format_list(&groups, true),
            [
                "GROUP               STATE",
                "alpha               Stable",
                "a-much-longer-group Unknown",
            ]
        );
        assert_eq!(
            format_delete(&[("a".into(), None), ("b".into(), None)]),
            ["Deletion of requested consumer groups ('a', 'b') was successful."]
        );
        assert_eq!(
            format_delete(&[
                (
                    "G".into(),
                    Some(error_name(ResponseError::NonEmptyGroup.code()))
                ),
                ("ok".into(), None)
            ]),
            [
                "Deletion of some consumer groups failed:",
                "* Group 'G' could not be deleted due to: NON_EMPTY_GROUP",
                "",
                "These consumer groups were deleted successfully: 'ok'",
            ]
        );
    }

    #[test]
    fn which_groups_are_consumer_groups() {
        let g = |pt: &str, ty: Option<&str>| ListedGroup {
            group_id: "x".into(),
            protocol_type: pt.into(),
            state: None,
            group_type: ty.map(Into::into),
        };
        assert!(g("consumer", None).is_consumer_group());
        assert!(g("", None).is_consumer_group());
        assert!(!g("connect", None).is_consumer_group());
        assert!(g("consumer", Some("classic")).is_consumer_group());
        assert!(g("consumer", Some("consumer")).is_consumer_group());
        assert!(g("consumer", Some("consumer")).is_consumer_protocol());
        assert!(!g("", Some("share")).is_consumer_group());
        assert!(!g("consumer", Some("classic")).is_consumer_protocol());
    }

    #[test]
    fn error_names_follow_kafka() {
        // Wire numbers on purpose: this checks the names against Kafka's own table.
        assert_eq!(error_name(0), "NONE");
        assert_eq!(error_name(68), "NON_EMPTY_GROUP");
        assert_eq!(error_name(69), "GROUP_ID_NOT_FOUND");
        assert_eq!(error_name(16), "NOT_COORDINATOR");
        assert_eq!(error_name(-1), "UNKNOWN_SERVER_ERROR");
        assert_eq!(error_name(30_000), "UNKNOWN_ERROR_CODE_30000");
    }

    #[test]
    fn consumer_assignment_round_trip_and_defensive_decode() {
        let a = tps(&[("orders", &[2, 0, 1]), ("b", &[7])]);
        for v in 0..=3 {
            let bytes = encode_consumer_assignment(&a, v);
            assert_eq!(
                decode_consumer_assignment(&bytes),
                Some(tps(&[("b", &[7]), ("orders", &[0, 1, 2])])),
                "v{v}"
            );
        }
        // A newer version with extra trailing fields: read the known prefix.
        let mut newer = encode_consumer_assignment(&a, 3).to_vec();
        newer[0..2].copy_from_slice(&7i16.to_be_bytes());
        newer.extend_from_slice(&[1, 2, 3, 4, 5]);
        assert_eq!(decode_consumer_assignment(&newer).map(|t| t.len()), Some(2));
        // Empty, negative version, truncated, lying lengths.
        assert_eq!(decode_consumer_assignment(&[]), None);
        assert_eq!(decode_consumer_assignment(&[0xff, 0xff, 0, 0, 0, 0]), None);
        let good = encode_consumer_assignment(&a, 1);
        for cut in 2..good.len() - 4 {
            assert_eq!(decode_consumer_assignment(&good[..cut]), None, "cut {cut}");
        }
        let mut lying = vec![0u8, 1];
        lying.extend_from_slice(&i32::MAX.to_be_bytes());
        assert_eq!(decode_consumer_assignment(&lying), None);
        let mut lying_inner = vec![0u8, 1, 0, 0, 0, 1, 0, 1, b't'];
        lying_inner.extend_from_slice(&0x4000_0000i32.to_be_bytes());
        assert_eq!(decode_consumer_assignment(&lying_inner), None);
    }

    #[test]
    fn table_pads_to_widest_and_trims() {
        let rows = vec![
            vec!["a".to_string(), "".to_string()],
            vec!["long-value".to_string(), "x".to_string()],
        ];
        assert_eq!(
            format_table(&["H1", "H2"], &rows),
            ["H1         H2", "a", "long-value x"]
        );
    }

    #[test]
    fn datetime_and_duration_parsing() {
        assert_eq!(
            parse_datetime("2023-11-14T22:13:20.000"),
            Ok(1_700_000_000_000)
        );
        assert_eq!(
            parse_datetime("2023-11-14T22:13:20.5Z"),
            Ok(1_700_000_000_500)
        );
        assert_eq!(parse_datetime("2023-11-14T22:13:20"), Ok(1_700_000_000_000));
        assert_eq!(
            parse_datetime("2023-11-15T00:13:20.000+02:00"),
            Ok(1_700_000_000_000)
        );
        assert_eq!(parse_datetime("1970-01-01T00:00:00.000"), Ok(0));
        for bad in [
            "2023-11-14",
            "2023-13-14T00:00:00",
            "2023-11-14T22:13:20.000X",
            "x",
        ] {
            assert!(parse_datetime(bad).is_err(), "{bad}");
        }
        assert_eq!(parse_duration_ms("PT1H"), Ok(3_600_000));
        assert_eq!(parse_duration_ms("P1DT2H3M4.5S"), Ok(93_784_500));
        assert_eq!(parse_duration_ms("pt30s"), Ok(30_000));
        assert_eq!(parse_duration_ms("-PT1M"), Ok(-60_000));
        for bad in ["1d", "P", "PT", "P1H", "PT1D", "PT1S2M", ""] {
            assert!(parse_duration_ms(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn reset_and_delete_offsets_formats() {
        let mut m = BTreeMap::new();
        m.insert(("orders".to_string(), 1), 5);
        m.insert(("orders".to_string(), 0), 12);
        assert_eq!(
            format_reset(&[("g1".to_string(), m)]),
            [
                "",
                "GROUP           TOPIC           PARTITION  NEW-OFFSET",
                "g1              orders          0          12",
                "g1              orders          1          5",
            ]
        );
        assert_eq!(format_reset(&[]), [""]);
        let rows = vec![
            (("t".to_string(), 10), None),
            (
                ("t".to_string(), 2),
                Some(ResponseError::GroupSubscribedToTopic.code()),
            ),
        ];
        let out = format_delete_offsets("g", ResponseError::GroupSubscribedToTopic.code(), &rows);
        assert_eq!(
            out[..3],
            [
                "",
                "Error: Encountered some partition-level error, see the follow-up details.",
                ""
            ]
        );
        assert_eq!(out[3], "TOPIC           PARTITION  STATUS         ");
        // Kafka's order: "t10" before "t2".
        assert_eq!(out[4], "t               10         Successful     ");
        assert!(out[5].starts_with("t               2          Error: org.apache.kafka.common.errors.GroupSubscribedToTopicException: "));
        assert_eq!(parse_topic_arg("a:1,2"), Ok(("a".into(), Some(vec![1, 2]))));
        assert_eq!(parse_topic_arg("a"), Ok(("a".into(), None)));
        assert!(parse_topic_arg("a:x").is_err());
        assert!(parse_topic_arg("a:1:2").is_err());
    }

    #[test]
    fn argument_validation() {
        let action = |argv: &[&str]| validate(&parse(argv));
        assert_eq!(action(&["--list"]), Ok(Action::List { state: false }));
        assert_eq!(
            action(&["--list", "--state"]),
            Ok(Action::List { state: true })
        );
        assert_eq!(
            action(&["--describe", "--group", "a", "--group", "b", "--group", "a"]),
            Ok(Action::Describe {
                groups: GroupSelection::Named(vec!["a".into(), "b".into()]),
                view: DescribeView::Offsets,
                verbose: false
            })
        );
        assert_eq!(
            action(&["--describe", "--all-groups", "--members", "--verbose"]),
            Ok(Action::Describe {
                groups: GroupSelection::All,
                view: DescribeView::Members,
                verbose: true
            })
        );
        assert!(action(&["--describe", "--group", "g", "--state", "--offsets"]).is_err());
        assert_eq!(
            action(&["--delete", "--group", "g"]),
            Ok(Action::Delete {
                groups: GroupSelection::Named(vec!["g".into()])
            })
        );
        for bad in [
            &[][..],
            &["--describe"],
            &["--delete"],
            &["--list", "--describe", "--group", "g"],
            &["--describe", "--group", "g", "--all-groups"],
            &["--describe", "--group", "g", "--members", "--state"],
            &["--list", "--group", "g"],
            &["--list", "--members"],
            &["--delete", "--group", "g", "--state"],
            &["--list", "--timeout-ms", "0"],
            &["--list", "--bootstrap", " , "],
        ] {
            assert!(action(bad).is_err(), "{bad:?} should be rejected");
        }
    }

    #[test]
    fn bad_arguments_exit_2_without_connecting() {
        // Port 1 on localhost is closed; exit 2 proves validation ran before any connect.
        for argv in [
            &["--bootstrap", "127.0.0.1:1"][..],
            &["--bootstrap", "127.0.0.1:1", "--describe"],
            &[
                "--bootstrap",
                "127.0.0.1:1",
                "--delete",
                "--all-groups",
                "--group",
                "x",
            ],
        ] {
            let mut out = Vec::new();
            assert_eq!(run(&parse(argv), &mut out), 2, "{argv:?}");
            let text = String::from_utf8(out).unwrap();
            assert!(text.starts_with("Error: "), "{text}");
        }
    }

    #[test]
    fn unreachable_broker_exits_1() {
        let port = {
            let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
            l.local_addr().unwrap().port()
        };
        let mut out = Vec::new();
        let args = parse(&["--list", "--bootstrap", &format!("127.0.0.1:{port}")]);
        assert_eq!(run(&args, &mut out), 1);
        let text = String::from_utf8(out).unwrap();
        assert!(text.contains("cannot connect"), "{text}");
        let mut out = Vec::new();
        let args = parse(&["--list", "--bootstrap", "no-port-here"]);
        assert_eq!(run(&args, &mut out), 1);
    }
}
