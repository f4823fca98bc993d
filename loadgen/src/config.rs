//! The command line, its validation, and the derived run configuration.

use clap::{Parser, ValueEnum};
use serde::Serialize;
use std::time::Duration;

/// Which group protocol the simulated members speak.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Protocol {
    /// JoinGroup / SyncGroup / Heartbeat (the classic rebalance protocol).
    Classic,
    /// KIP-848 ConsumerGroupHeartbeat (members heartbeat at the interval the broker returns).
    Consumer,
}

impl std::fmt::Display for Protocol {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Protocol::Classic => "classic",
            Protocol::Consumer => "consumer",
        })
    }
}

/// Ceiling on the default number of shared connections (one per member up to this many).
pub const DEFAULT_CONNECTIONS_CAP: usize = 1024;

#[derive(Debug, Clone, Parser, Serialize)]
#[command(
    name = "loadgen",
    about = "Simulate many Kafka consumer-group members over real TCP and report latency histograms",
    long_about = "Simulates thousands of consumer-group members against a Kafka-compatible broker \
                  (Ringleader, Apache Kafka, Tansu, ...): each member finds its coordinator, joins, \
                  syncs (the leader computes a range assignment), heartbeats, fetches and commits \
                  offsets, and rejoins on errors, like a real consumer. Members are multiplexed over \
                  --connections shared TCP connections (heartbeats, commits, fetches, leaves); \
                  JoinGroup and SyncGroup, which a broker may park for seconds, use a separate pool \
                  of connections with one request in flight each, so a parked request never delays \
                  another member. Reports go to stdout (percentile table), stderr (live progress, \
                  once a second) and --out (one .hgrm per API, summary.json, latency.svg)."
)]
pub struct Args {
    /// Bootstrap broker, host:port.
    #[arg(long, default_value = "127.0.0.1:9092")]
    pub bootstrap: String,

    /// Connect with TLS (every connection), trusting the CA certificates in this PEM file. The
    /// broker's certificate is checked against the --bootstrap host (DNS name or IP address).
    #[arg(long, value_name = "PATH")]
    pub tls_ca: Option<std::path::PathBuf>,

    /// TLS client certificate chain (PEM), for brokers that require one (ssl.client.auth).
    #[arg(long, value_name = "PATH", requires = "tls_ca")]
    pub tls_cert: Option<std::path::PathBuf>,

    /// Private key of --tls-cert (PEM, PKCS#8/PKCS#1/SEC1). Default: the --tls-cert file itself
    /// (a PEM keystore: key and chain in one file).
    #[arg(long, value_name = "PATH", requires = "tls_cert")]
    pub tls_key: Option<std::path::PathBuf>,

    /// Group protocol to simulate.
    #[arg(long, value_enum, default_value_t = Protocol::Classic)]
    pub protocol: Protocol,

    /// Number of consumer groups.
    #[arg(long, default_value_t = 10)]
    pub groups: usize,

    /// Members per group.
    #[arg(long, default_value_t = 10)]
    pub members_per_group: usize,

    /// Topics every member subscribes to (created at start if missing, named loadgen-t{i}).
    #[arg(long, default_value_t = 1)]
    pub topics: usize,

    /// Partitions per topic (used when creating a topic).
    #[arg(long, default_value_t = 12)]
    pub partitions: i32,

    /// Topic name prefix (topic i is PREFIX{i}).
    #[arg(long, default_value = "loadgen-t")]
    pub topic_prefix: String,

    /// Heartbeat interval [default: 3000 for classic]. Closed loop: a member heartbeats this long
    /// after its previous heartbeat was sent, once its response has arrived. With `--protocol
    /// consumer` members use the interval the broker returns (`heartbeat_interval_ms` of
    /// ConsumerGroupHeartbeat) unless this flag is given, which then overrides it.
    #[arg(long)]
    pub heartbeat_interval_ms: Option<u64>,

    /// KIP-848 (`--protocol consumer`): a member counts as stable (the live stable count, churn,
    /// the rebalance-convergence histogram) only once it owns at least this many partitions. The
    /// protocol does not tell a member that more partitions are coming (another member may still
    /// be revoking them), and a broker that shortens the heartbeat interval while a member waits
    /// (Ringleader) makes the default rule — an empty assignment is final once a heartbeat passed
    /// without change — fire early. Give it when every member's share is known: partitions a
    /// multiple of the group size (so not with --late-joiners, which changes every share).
    #[arg(long)]
    pub expect_partitions: Option<usize>,

    /// Session timeout sent in JoinGroup.
    #[arg(long, default_value_t = 45000)]
    pub session_timeout_ms: u64,

    /// Rebalance timeout sent in JoinGroup (the Java client's max.poll.interval.ms).
    #[arg(long, default_value_t = 300000)]
    pub rebalance_timeout_ms: u64,

    /// Offset commit interval per member; 0 = never commit.
    #[arg(long, default_value_t = 5000)]
    pub commit_interval_ms: u64,

    /// Members leaving (LeaveGroup) and re-joining as new members, per second across the whole run.
    #[arg(long, default_value_t = 0.0)]
    pub churn_per_s: f64,

    /// Run time (e.g. 30s, 2m, 500ms, 1h; a bare number is seconds).
    #[arg(long, default_value = "30s", value_parser = parse_duration)]
    #[serde(serialize_with = "ser_duration")]
    pub duration: Duration,

    /// Leave the first part of the run out of the per-API latency histograms (the start-up
    /// join storm), and the drain after it (every member leaving at once), to read steady-state
    /// latency. Counts, errors and rebalance convergence still cover the whole run.
    #[arg(long, default_value = "0s", value_parser = parse_duration)]
    #[serde(serialize_with = "ser_duration")]
    pub warmup: Duration,

    /// Spread member start-up over this long (0 = all members start at once).
    #[arg(long, default_value = "0s", value_parser = parse_duration)]
    #[serde(serialize_with = "ser_duration")]
    pub ramp_up: Duration,

    /// Shared TCP connections the members are multiplexed over, round-robin (member i uses
    /// connection i mod N). Default: one per member, capped at 1024. JoinGroup/SyncGroup use a
    /// separate pool of connections (see --help).
    #[arg(long)]
    pub connections: Option<usize>,

    /// Requests in flight per shared connection; more wait in loadgen (and that wait is part of
    /// the measured latency).
    #[arg(long, default_value_t = 256)]
    pub max_in_flight: usize,

    /// Open loop: a fixed total heartbeat rate (requests/s) spread round-robin over the stable
    /// members, replacing the per-member interval. Latency is measured from each request's
    /// intended send time (coordinated-omission correction).
    #[arg(long)]
    pub rate: Option<f64>,

    /// Worker threads; each owns a subset of the connections and their members. Default: the
    /// CPUs this process may run on.
    #[arg(long)]
    pub cores: Option<usize>,

    /// Directory for the report files.
    #[arg(long, default_value = "./loadgen-report")]
    pub out: String,

    /// Exit non-zero when errors / requests exceed this fraction.
    #[arg(long, default_value_t = 0.01)]
    pub max_error_rate: f64,

    /// Group id prefix (group i is PREFIX{i}).
    #[arg(long, default_value = "loadgen-g")]
    pub group_prefix: String,

    /// client_id in every request header.
    #[arg(long, default_value = "loadgen")]
    pub client_id: String,

    /// Request timeout for non-rebalance requests (JoinGroup/SyncGroup wait up to the rebalance
    /// timeout + 5 s). A timed-out request closes its connection, as Kafka clients do.
    #[arg(long, default_value_t = 30000)]
    pub request_timeout_ms: u64,

    /// Cap the version used for an API, e.g. `--max-api-version JoinGroup=5` (repeatable);
    /// handy to imitate a particular client. Names as in the Kafka protocol guide.
    #[arg(long = "max-api-version", value_name = "API=V", value_parser = parse_api_cap)]
    pub max_api_versions: Vec<(String, i16)>,

    /// Do not send LeaveGroup for every member when the run ends.
    #[arg(long)]
    pub no_leave_on_exit: bool,

    /// How long to wait for in-flight requests (and the final LeaveGroups) after the run.
    #[arg(long, default_value = "3s", value_parser = parse_duration)]
    #[serde(serialize_with = "ser_duration")]
    pub drain: Duration,

    /// After a socket event, busy-poll this many microseconds before sleeping while requests
    /// are in flight, so the responses of a burst are read without a cross-core wake-up each
    /// (which would otherwise be measured as broker latency). Costs CPU; meant for benchmarks
    /// where loadgen has cores of its own. 0 (default) = always sleep.
    #[arg(long, default_value_t = 0)]
    pub spin_us: u64,

    /// Do not print progress lines to stderr.
    #[arg(long)]
    pub quiet: bool,

    /// Sample this process (the broker) from /proc once a second: CPU time over the steady
    /// window (after --warmup, before the final leave storm) and RSS, into summary.json's
    /// `server`. Local brokers only.
    #[arg(long)]
    pub server_pid: Option<u32>,

    /// End the run as soon as every group has converged — every member stable, every partition
    /// owned, owned counts balanced to within one — and every --late-joiners member has joined
    /// (--duration stays the limit). Reports the time to converge in summary.json's
    /// `group_convergence`.
    #[arg(long)]
    pub until_stable: bool,

    /// Once the groups have converged, this many more members join group 0, one at a time, each
    /// after the group converged again; reports each one's join → stable and join → group
    /// converged (the "one member joins a stable group" measurement).
    #[arg(long, default_value_t = 0)]
    pub late_joiners: u32,
}

/// The classic default heartbeat interval.
pub const DEFAULT_HEARTBEAT_INTERVAL_MS: u64 = 3000;

fn ser_duration<S: serde::Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(&format_duration(*d))
}

/// Parse a human duration: `500ms`, `30s`, `2m`, `1h`, `1.5s`, `250us`, or a bare number of
/// seconds. Combinations such as `1m30s` are accepted too.
pub fn parse_duration(input: &str) -> Result<Duration, String> {
    let s = input.trim();
    if s.is_empty() {
        return Err("empty duration".into());
    }
    if let Ok(secs) = s.parse::<f64>() {
        return secs_to_duration(secs, input);
    }
    let mut total = 0f64;
    let mut rest = s;
    while !rest.is_empty() {
        let num_len = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .ok_or_else(|| format!("duration {input:?}: missing unit after the last number"))?;
        if num_len == 0 {
            return Err(format!(
                "duration {input:?}: expected a number at {rest:?} (units: ms, s, m, h)"
            ));
        }
        let value: f64 = rest[..num_len]
            .parse()
            .map_err(|_| format!("duration {input:?}: bad number {:?}", &rest[..num_len]))?;
        rest = &rest[num_len..];
        let unit_len = rest
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .unwrap_or(rest.len());
        let unit = rest[..unit_len].trim();
        let scale = match unit {
            "ns" => 1e-9,
            "us" | "µs" => 1e-6,
            "ms" => 1e-3,
            "s" | "sec" | "secs" => 1.0,
            "m" | "min" | "mins" => 60.0,
            "h" | "hr" | "hrs" => 3600.0,
            other => {
                return Err(format!(
                    "duration {input:?}: unknown unit {other:?} (use ms, s, m or h)"
                ))
            }
        };
        total += value * scale;
        rest = &rest[unit_len..];
    }
    secs_to_duration(total, input)
}

fn secs_to_duration(secs: f64, input: &str) -> Result<Duration, String> {
    if !secs.is_finite() || secs < 0.0 {
        return Err(format!("duration {input:?} must be a non-negative number"));
    }
    Ok(Duration::from_secs_f64(secs))
}

/// Format a duration the way `parse_duration` reads it back.
pub fn format_duration(d: Duration) -> String {
    let ms = d.as_millis();
    if ms.is_multiple_of(1000) {
        format!("{}s", ms / 1000)
    } else {
        format!("{ms}ms")
    }
}

fn parse_api_cap(s: &str) -> Result<(String, i16), String> {
    let (name, v) = s
        .split_once('=')
        .ok_or_else(|| format!("{s:?}: expected API=VERSION, e.g. JoinGroup=5"))?;
    let v: i16 = v
        .trim()
        .parse()
        .map_err(|_| format!("{s:?}: version must be a small integer"))?;
    let name = name.trim();
    if crate::api::Api::from_name(name).is_none() {
        return Err(format!(
            "{s:?}: unknown API {name:?} (one of: {})",
            crate::api::Api::ALL
                .iter()
                .map(|a| a.name())
                .collect::<Vec<_>>()
                .join(", ")
        ));
    }
    Ok((name.to_string(), v))
}

impl Args {
    /// The classic heartbeat interval (the flag or 3000 ms).
    pub fn classic_heartbeat_interval_ms(&self) -> u64 {
        self.heartbeat_interval_ms
            .unwrap_or(DEFAULT_HEARTBEAT_INTERVAL_MS)
    }

    /// Members that start with the run (late joiners not included).
    pub fn total_members(&self) -> usize {
        self.groups * self.members_per_group
    }

    /// Whether group convergence is tracked (`--until-stable`, `--late-joiners`).
    pub fn tracks_convergence(&self) -> bool {
        self.until_stable || self.late_joiners > 0
    }

    /// Shared connections actually used.
    pub fn shared_connections(&self) -> usize {
        let members = self.total_members().max(1);
        self.connections
            .unwrap_or_else(|| members.min(DEFAULT_CONNECTIONS_CAP))
            .clamp(1, members)
    }

    /// Worker threads actually used (never more than connections).
    pub fn worker_threads(&self) -> usize {
        let cpus = std::thread::available_parallelism()
            .map(|n| n.get())
            .unwrap_or(1);
        self.cores
            .unwrap_or(cpus)
            .clamp(1, self.shared_connections())
    }

    /// Check values that clap cannot. Returns a message for the user.
    pub fn validate(&self) -> Result<(), String> {
        if self.groups == 0 || self.members_per_group == 0 {
            return Err("--groups and --members-per-group must be at least 1".into());
        }
        if self.partitions < 1 {
            return Err("--partitions must be at least 1".into());
        }
        if self.heartbeat_interval_ms == Some(0) {
            return Err("--heartbeat-interval-ms must be at least 1".into());
        }
        if self.session_timeout_ms > i32::MAX as u64 || self.rebalance_timeout_ms > i32::MAX as u64
        {
            return Err("timeouts must fit in an int32 of milliseconds".into());
        }
        if !(self.churn_per_s >= 0.0 && self.churn_per_s.is_finite()) {
            return Err("--churn-per-s must be a non-negative number".into());
        }
        if self.rate.is_some() && self.protocol == Protocol::Consumer {
            return Err(
                "--rate (open loop) is for --protocol classic only: a KIP-848 member's \
                        heartbeats carry its state, so it never has two in flight"
                    .into(),
            );
        }
        if let Some(r) = self.rate {
            if !(r > 0.0 && r.is_finite()) {
                return Err("--rate must be a positive number of requests per second".into());
            }
        }
        if self.max_in_flight == 0 {
            return Err("--max-in-flight must be at least 1".into());
        }
        if !(0.0..=1.0).contains(&self.max_error_rate) {
            return Err("--max-error-rate is a fraction between 0 and 1".into());
        }
        if self.duration.is_zero() {
            return Err("--duration must be longer than zero".into());
        }
        if self.warmup >= self.duration {
            return Err("--warmup must be shorter than --duration".into());
        }
        if self.cores == Some(0) || self.connections == Some(0) {
            return Err("--cores and --connections must be at least 1".into());
        }
        if self.tracks_convergence() && self.protocol == Protocol::Classic && self.topics > 1 {
            return Err(
                "--until-stable / --late-joiners with --protocol classic need --topics 1: the \
                 range assignor balances each topic on its own, and a balanced group is part of \
                 what converged means"
                    .into(),
            );
        }
        if let Some(k) = self.expect_partitions {
            // Classic members have no notion of waiting for a share (the leader hands out the
            // whole assignment in one SyncGroup), so the flag would be parsed and ignored.
            if self.protocol != Protocol::Consumer {
                return Err("--expect-partitions is for --protocol consumer only".into());
            }
            if k == 0
                || (k as u64).saturating_mul(self.members_per_group as u64)
                    > self.topics as u64 * self.partitions as u64
            {
                return Err(
                    "--expect-partitions must be at least 1, and every member's share must fit in \
                     the group's partitions (--topics x --partitions)"
                        .into(),
                );
            }
            // A late joiner shrinks every share, so members would wait for partitions that
            // never come and the group would never converge.
            if self.late_joiners > 0 {
                return Err(
                    "--expect-partitions cannot be combined with --late-joiners: each joiner \
                     changes every member's share"
                        .into(),
                );
            }
        }
        if self.client_id.len() > i16::MAX as usize {
            return Err("--client-id is too long".into());
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations() {
        assert_eq!(parse_duration("30s").unwrap(), Duration::from_secs(30));
        assert_eq!(parse_duration("2m").unwrap(), Duration::from_secs(120));
        assert_eq!(parse_duration("500ms").unwrap(), Duration::from_millis(500));
        assert_eq!(parse_duration("1h").unwrap(), Duration::from_secs(3600));
        assert_eq!(parse_duration("1.5s").unwrap(), Duration::from_millis(1500));
        assert_eq!(parse_duration("4").unwrap(), Duration::from_secs(4));
        assert_eq!(parse_duration("1m30s").unwrap(), Duration::from_secs(90));
        assert_eq!(
            parse_duration(" 250us ").unwrap(),
            Duration::from_micros(250)
        );
        assert!(parse_duration("").is_err());
        assert!(parse_duration("10x").is_err());
        assert!(parse_duration("s").is_err());
        assert!(parse_duration("-3s").is_err());
        assert!(parse_duration("3 s").is_ok());
    }

    #[test]
    fn duration_format_round_trips() {
        for d in ["30s", "500ms", "1500ms", "0s"] {
            assert_eq!(format_duration(parse_duration(d).unwrap()), d);
        }
    }

    #[test]
    fn cli_defaults_and_derived_values() {
        let a = Args::parse_from(["loadgen", "--groups", "3", "--members-per-group", "5"]);
        assert_eq!(a.protocol, Protocol::Classic);
        assert_eq!(a.total_members(), 15);
        assert_eq!(a.shared_connections(), 15);
        assert_eq!(a.heartbeat_interval_ms, None);
        assert_eq!(a.classic_heartbeat_interval_ms(), 3000);
        assert_eq!(a.session_timeout_ms, 45000);
        assert_eq!(a.commit_interval_ms, 5000);
        assert_eq!(a.duration, Duration::from_secs(30));
        assert!(a.worker_threads() >= 1);
        a.validate().unwrap();

        let a = Args::parse_from([
            "loadgen",
            "--groups",
            "2000",
            "--members-per-group",
            "5",
            "--duration",
            "2m",
            "--max-api-version",
            "JoinGroup=5",
            "--protocol",
            "consumer",
            "--cores",
            "64",
            "--connections",
            "8",
        ]);
        assert_eq!(a.shared_connections(), 8);
        assert_eq!(a.worker_threads(), 8);
        assert_eq!(a.duration, Duration::from_secs(120));
        assert_eq!(a.max_api_versions, vec![("JoinGroup".to_string(), 5)]);
        assert_eq!(a.protocol, Protocol::Consumer);

        let d = Args::parse_from(["loadgen", "--groups", "1000", "--members-per-group", "10"]);
        assert_eq!(d.shared_connections(), DEFAULT_CONNECTIONS_CAP);
        assert!(Args::try_parse_from(["loadgen", "--max-api-version", "Nope=1"]).is_err());
        assert!(Args::try_parse_from(["loadgen", "--duration", "soon"]).is_err());
        let bad = Args::parse_from(["loadgen", "--rate", "0"]);
        assert!(bad.validate().is_err());
        let w = Args::parse_from(["loadgen", "--warmup", "10s", "--duration", "30s"]);
        assert_eq!(w.warmup, Duration::from_secs(10));
        w.validate().unwrap();
        let e = |extra: &[&str]| {
            let mut v = vec!["loadgen", "--members-per-group", "4", "--partitions", "8"];
            v.extend_from_slice(extra);
            Args::parse_from(v).validate()
        };
        e(&["--protocol", "consumer", "--expect-partitions", "2"]).unwrap();
        assert!(
            e(&["--expect-partitions", "2"]).is_err(),
            "classic members have no share to wait for"
        );
        assert!(e(&["--protocol", "consumer", "--expect-partitions", "0"]).is_err());
        assert!(
            e(&["--protocol", "consumer", "--expect-partitions", "3"]).is_err(),
            "4 members cannot each own 3 of 8 partitions"
        );
        assert!(e(&[
            "--protocol",
            "consumer",
            "--expect-partitions",
            "2",
            "--late-joiners",
            "1"
        ])
        .is_err());
        let w = Args::parse_from(["loadgen", "--warmup", "30s", "--duration", "30s"]);
        assert!(
            w.validate().is_err(),
            "a warm-up as long as the run leaves nothing"
        );
    }
}
