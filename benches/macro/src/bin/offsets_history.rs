//! offsets-history: the restart row of `scripts/bench-kafka.sh` — write a known history of offset
//! commits into a broker's `__consumer_offsets`, then, after the broker restarts, time how long it
//! takes to answer for those groups again.
//!
//! - `fill`: creates `--topic` with `--partitions` partitions and sends `--records / --partitions`
//!   OffsetCommit v8 requests, each committing every partition of the topic for one group
//!   (group-less "simple" commits: generation -1, no member id, as `hbflood --request commit`),
//!   round-robin over `--groups` groups, pipelined over `--connections` connections with
//!   `--pipeline` requests in flight each. Request r goes to group r mod G in round r / G + 1 and
//!   commits offset `round * 1,000,000 + partition`, so the final value of every (group, partition)
//!   is known without remembering anything. A group's requests all go on one connection (group g
//!   on connection g mod C), in round order, and never two of them in flight at once (the window
//!   is at most the connection's number of groups), so the last round is the last applied on any
//!   broker, whatever order it serves different connections in. The same requests for any broker.
//! - `probe`: from the moment it starts, connects (retrying while the port is closed) and asks
//!   OffsetFetch v8 until (1) the first group returns exactly the offsets the fill left —
//!   COORDINATOR_LOAD_IN_PROGRESS, NOT_COORDINATOR and COORDINATOR_NOT_AVAILABLE mean "not yet" —
//!   and then (2) every group does (one partition each, batched). Times are measured from the
//!   broker process's start (`--pid`: its start time in /proc/PID/stat, 10 ms resolution, on the
//!   same boot-time clock as this tool's), so the JVM's or the binary's own start-up counts.
//!
//! JSON to `--json` (or stdout). Exit 1 on any error response in `fill`; in `probe`, on an answer
//! with other offsets than the history's (a loaded group's offsets do not change) or a time-out.

use anyhow::{bail, ensure, Context};
use clap::{Args as ClapArgs, Parser, Subcommand};
use kafka_protocol::messages::create_topics_request::CreatableTopic;
use kafka_protocol::messages::offset_commit_request::{
    OffsetCommitRequestPartition, OffsetCommitRequestTopic,
};
use kafka_protocol::messages::offset_fetch_request::{
    OffsetFetchRequestGroup, OffsetFetchRequestTopics,
};
use kafka_protocol::messages::{
    CreateTopicsRequest, FindCoordinatorRequest, GroupId, OffsetCommitRequest, OffsetFetchRequest,
    TopicName,
};
use ringleader_macro_bench::{frame, read_frame, s, NOT_YET};
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::io::Write;
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};
use wire::codec::decode_response;
use wire::{Request, Response};

/// The largest response frame accepted (an OffsetFetch of many groups × 1,000 partitions is large).
const MAX_RESPONSE: i32 = 256 << 20;

#[derive(Parser, Debug)]
#[command(
    about = "Write a known offset-commit history, or time how long a restarted broker takes to answer for it"
)]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand, Debug)]
enum Cmd {
    /// Write the history.
    Fill(FillArgs),
    /// After a restart: time until the groups answer with the history's offsets.
    Probe(ProbeArgs),
}

#[derive(ClapArgs, Debug, Clone)]
struct Shape {
    /// Broker, host:port.
    #[arg(long)]
    target: String,
    /// Groups the commits go round-robin over.
    #[arg(long, default_value_t = 1000)]
    groups: usize,
    /// Partitions of the topic; every request commits all of them for one group.
    #[arg(long, default_value_t = 1000)]
    partitions: i32,
    /// Offset-commit records in the whole history (requests = records / partitions).
    #[arg(long, default_value_t = 10_000_000)]
    records: u64,
    #[arg(long, default_value = "history-t")]
    topic: String,
    #[arg(long, default_value = "history-g")]
    group_prefix: String,
    #[arg(long, default_value = "offsets-history")]
    client_id: String,
    /// Write the JSON result here (default: stdout).
    #[arg(long)]
    json: Option<std::path::PathBuf>,
}

#[derive(ClapArgs, Debug)]
struct FillArgs {
    #[command(flatten)]
    shape: Shape,
    /// Connections the requests are spread over.
    #[arg(long, default_value_t = 16)]
    connections: usize,
    /// Requests in flight per connection.
    #[arg(long, default_value_t = 4)]
    pipeline: usize,
}

#[derive(ClapArgs, Debug)]
struct ProbeArgs {
    #[command(flatten)]
    shape: Shape,
    /// The broker's process id: times are measured from its start.
    #[arg(long)]
    pid: u32,
    /// Give up after this long.
    #[arg(long, default_value_t = 600)]
    timeout_secs: u64,
    /// Pause between two OffsetFetch polls, milliseconds.
    #[arg(long, default_value_t = 10)]
    poll_ms: u64,
}

const COMMIT_KEY: i16 = 8;
const COMMIT_VERSION: i16 = 8;
const FETCH_KEY: i16 = 9;
const FETCH_VERSION: i16 = 8;
const CREATE_TOPICS_KEY: i16 = 19;
const CREATE_TOPICS_VERSION: i16 = 5;
const FIND_COORDINATOR_KEY: i16 = 10;
const FIND_COORDINATOR_VERSION: i16 = 3;
/// Groups per OffsetFetch while waiting for all of them.
const FETCH_BATCH: usize = 250;

impl Shape {
    fn addr(&self) -> anyhow::Result<SocketAddr> {
        std::net::ToSocketAddrs::to_socket_addrs(&self.target)?
            .next()
            .context("target does not resolve")
    }
    fn requests(&self) -> u64 {
        self.records / self.partitions.max(1) as u64
    }
    fn group(&self, g: usize) -> String {
        format!("{}{g}", self.group_prefix)
    }
    /// How many requests went to group g (its last round).
    fn rounds(&self, g: usize) -> u64 {
        let (r, n) = (self.requests(), self.groups as u64);
        r / n + u64::from((g as u64) < r % n)
    }
    fn validate(&self) -> anyhow::Result<()> {
        ensure!(self.groups > 0, "--groups must be positive");
        ensure!(self.partitions > 0, "--partitions must be positive");
        ensure!(
            self.requests() >= self.groups as u64,
            "--records / --partitions ({}) must give every one of the {} groups a commit",
            self.requests(),
            self.groups
        );
        Ok(())
    }
}

/// The offset a request of `round` commits for `partition`.
fn offset(round: u64, partition: i32) -> i64 {
    round as i64 * 1_000_000 + i64::from(partition)
}

fn call(
    st: &mut TcpStream,
    client_id: &str,
    key: i16,
    version: i16,
    corr: i32,
    req: &Request,
) -> anyhow::Result<Response> {
    st.write_all(&frame(client_id, key, version, corr, req))?;
    let (c, resp) = decode_response(key, version, &read_frame(st, MAX_RESPONSE)?)?;
    ensure!(c == corr, "correlation id {c}, expected {corr}");
    Ok(resp)
}

fn commit_request(shape: &Shape, group: &str, round: u64) -> Request {
    Request::OffsetCommit(
        OffsetCommitRequest::default()
            .with_group_id(GroupId(s(group)))
            .with_generation_id_or_member_epoch(-1)
            .with_member_id(s(""))
            .with_topics(vec![OffsetCommitRequestTopic::default()
                .with_name(TopicName(s(&shape.topic)))
                .with_partitions(
                    (0..shape.partitions)
                        .map(|p| {
                            OffsetCommitRequestPartition::default()
                                .with_partition_index(p)
                                .with_committed_offset(offset(round, p))
                                .with_committed_metadata(Some(s("")))
                        })
                        .collect(),
                )]),
    )
}

/// Error codes of a commit response: (partitions answered, first non-zero code).
fn commit_result(resp: &Response) -> anyhow::Result<(usize, i16)> {
    let Response::OffsetCommit(r) = resp else {
        bail!("not an OffsetCommit response")
    };
    let mut n = 0;
    let mut code = 0;
    for p in r.topics.iter().flat_map(|t| t.partitions.iter()) {
        n += 1;
        if code == 0 {
            code = p.error_code;
        }
    }
    Ok((n, code))
}

/// Create the topic (existing is fine) and wait until a commit to its last partition succeeds:
/// Kafka creates `__consumer_offsets` on the first FindCoordinator and elects new partitions'
/// leaders a moment after answering CreateTopics.
fn prepare(shape: &Shape, st: &mut TcpStream) -> anyhow::Result<()> {
    let create = Request::CreateTopics(
        CreateTopicsRequest::default()
            .with_topics(vec![CreatableTopic::default()
                .with_name(TopicName(s(&shape.topic)))
                .with_num_partitions(shape.partitions)
                .with_replication_factor(1)])
            .with_timeout_ms(60_000),
    );
    let resp = call(
        st,
        &shape.client_id,
        CREATE_TOPICS_KEY,
        CREATE_TOPICS_VERSION,
        1,
        &create,
    )?;
    if let Response::CreateTopics(r) = resp {
        let code = r.topics.first().map(|t| t.error_code).unwrap_or(-1);
        // 36 TOPIC_ALREADY_EXISTS
        ensure!(
            code == 0 || code == 36,
            "CreateTopics {}: error {code}",
            shape.topic
        );
    }
    let probe_group = format!("{}probe", shape.group_prefix);
    let deadline = Instant::now() + Duration::from_secs(120);
    let last = shape.partitions - 1;
    for corr in 2.. {
        let req = Request::OffsetCommit(
            OffsetCommitRequest::default()
                .with_group_id(GroupId(s(&probe_group)))
                .with_generation_id_or_member_epoch(-1)
                .with_member_id(s(""))
                .with_topics(vec![OffsetCommitRequestTopic::default()
                    .with_name(TopicName(s(&shape.topic)))
                    .with_partitions(vec![OffsetCommitRequestPartition::default()
                        .with_partition_index(last)
                        .with_committed_offset(0)
                        .with_committed_metadata(Some(s("")))])]),
        );
        let (_, code) = commit_result(&call(
            st,
            &shape.client_id,
            COMMIT_KEY,
            COMMIT_VERSION,
            corr,
            &req,
        )?)?;
        if code == 0 {
            return Ok(());
        }
        if NOT_YET.contains(&code) {
            let find = Request::FindCoordinator(
                FindCoordinatorRequest::default().with_key(s(&probe_group)),
            );
            call(
                st,
                &shape.client_id,
                FIND_COORDINATOR_KEY,
                FIND_COORDINATOR_VERSION,
                corr + 1_000_000,
                &find,
            )?;
        }
        ensure!(
            Instant::now() < deadline,
            "commits to {} still fail: error {code}",
            shape.topic
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    unreachable!()
}

/// One fill connection's count: records acknowledged, requests with an error, codes seen.
type Tally = (u64, u64, BTreeMap<i16, u64>);

fn fill(a: &FillArgs) -> anyhow::Result<Value> {
    let shape = &a.shape;
    shape.validate()?;
    ensure!(
        a.connections > 0 && a.pipeline > 0,
        "--connections and --pipeline must be positive"
    );
    let addr = shape.addr()?;
    let mut st = TcpStream::connect(addr).with_context(|| format!("connect to {addr}"))?;
    st.set_nodelay(true)?;
    prepare(shape, &mut st)?;
    drop(st);
    let requests = shape.requests();
    let conns = a.connections.min(shape.groups);
    let t = Instant::now();
    let results: Vec<anyhow::Result<Tally>> = std::thread::scope(|sc| {
        let handles: Vec<_> = (0..conns)
            .map(|c| {
                sc.spawn(move || -> anyhow::Result<Tally> {
                    let mut st = TcpStream::connect(addr)?;
                    st.set_nodelay(true)?;
                    st.set_read_timeout(Some(Duration::from_secs(120)))?;
                    // This connection's groups are g ≡ c (mod conns); request r is for group r mod G.
                    let mine: Vec<u64> = (0..requests)
                        .filter(|r| (r % shape.groups as u64) as usize % conns == c)
                        .collect();
                    let my_groups = (shape.groups - c).div_ceil(conns);
                    let window = a.pipeline.min(my_groups).max(1);
                    let (mut sent, mut done) = (0usize, 0usize);
                    let (mut records, mut errors) = (0u64, 0u64);
                    let mut codes = BTreeMap::new();
                    let send = |st: &mut TcpStream, k: usize| -> anyhow::Result<()> {
                        let r = mine[k];
                        let g = (r % shape.groups as u64) as usize;
                        let round = r / shape.groups as u64 + 1;
                        let req = commit_request(shape, &shape.group(g), round);
                        st.write_all(&frame(
                            &shape.client_id,
                            COMMIT_KEY,
                            COMMIT_VERSION,
                            k as i32,
                            &req,
                        ))?;
                        Ok(())
                    };
                    while sent < mine.len() && sent < window {
                        send(&mut st, sent)?;
                        sent += 1;
                    }
                    while done < mine.len() {
                        let f = read_frame(&mut st, MAX_RESPONSE)?;
                        let (corr, resp) = decode_response(COMMIT_KEY, COMMIT_VERSION, &f)?;
                        ensure!(
                            corr == done as i32,
                            "correlation id {corr}, expected {done}"
                        );
                        let (n, code) = commit_result(&resp)?;
                        records += n as u64;
                        if code != 0 {
                            errors += 1;
                            *codes.entry(code).or_default() += 1;
                        }
                        done += 1;
                        if sent < mine.len() {
                            send(&mut st, sent)?;
                            sent += 1;
                        }
                    }
                    Ok((records, errors, codes))
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().unwrap_or_else(|_| bail!("a fill thread panicked")))
            .collect()
    });
    let secs = t.elapsed().as_secs_f64();
    let (mut records, mut errors) = (0u64, 0u64);
    let mut codes: BTreeMap<i16, u64> = BTreeMap::new();
    for r in results {
        let (n, e, c) = r?;
        records += n;
        errors += e;
        for (k, v) in c {
            *codes.entry(k).or_default() += v;
        }
    }
    eprintln!(
        "offsets-history fill {}: {requests} requests, {records} records in {secs:.1} s ({:.0} records/s), {errors} errors",
        shape.target,
        records as f64 / secs
    );
    Ok(json!({
        "mode": "fill",
        "target": shape.target,
        "groups": shape.groups,
        "partitions": shape.partitions,
        "requests": requests,
        "records": records,
        "seconds": secs,
        "records_per_s": records as f64 / secs,
        "requests_per_s": requests as f64 / secs,
        "errors": errors,
        "error_codes": codes.iter().map(|(k, v)| (k.to_string(), *v)).collect::<BTreeMap<_, _>>(),
        "connections": conns,
        "pipeline": a.pipeline,
        "passed": errors == 0 && records == requests * shape.partitions as u64,
    }))
}

/// CLOCK_BOOTTIME now, seconds: the clock /proc/PID/stat's start time is counted on.
fn boottime_secs() -> f64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes into the timespec we own.
    unsafe { libc::clock_gettime(libc::CLOCK_BOOTTIME, &mut ts) };
    ts.tv_sec as f64 + ts.tv_nsec as f64 / 1e9
}

/// A process's start, seconds since boot (field 22 of stat(5), in clock ticks).
fn process_start_secs(pid: u32) -> anyhow::Result<f64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .with_context(|| format!("no process {pid}"))?;
    let rest = &stat[stat.rfind(')').context("bad stat")? + 2..];
    // Field 22 is the 20th after the state field (field 3).
    let ticks: f64 = rest
        .split_whitespace()
        .nth(19)
        .context("short stat")?
        .parse()?;
    // SAFETY: sysconf has no preconditions.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) } as f64;
    Ok(ticks / hz)
}

/// Per group of an OffsetFetch: the group's error code, or 0 with whether every partition holds
/// the history's final offset.
type Answer = (i16, bool);

/// One OffsetFetch v8 over `groups`, each with `partitions` of the topic. Also the first
/// partition found with another offset than the history's, described.
fn fetch(
    shape: &Shape,
    st: &mut TcpStream,
    corr: i32,
    groups: &[usize],
    partitions: impl Fn(usize) -> Vec<i32>,
) -> anyhow::Result<(Vec<Answer>, Option<String>)> {
    let req = Request::OffsetFetch(
        OffsetFetchRequest::default().with_groups(
            groups
                .iter()
                .map(|&g| {
                    OffsetFetchRequestGroup::default()
                        .with_group_id(GroupId(s(&shape.group(g))))
                        .with_topics(Some(vec![OffsetFetchRequestTopics::default()
                            .with_name(TopicName(s(&shape.topic)))
                            .with_partition_indexes(partitions(g))]))
                })
                .collect(),
        ),
    );
    let Response::OffsetFetch(r) =
        call(st, &shape.client_id, FETCH_KEY, FETCH_VERSION, corr, &req)?
    else {
        bail!("not an OffsetFetch response")
    };
    if r.error_code != 0 {
        return Ok((vec![(r.error_code, false); groups.len()], None));
    }
    let mut out = Vec::with_capacity(groups.len());
    let mut wrong = None;
    for &g in groups {
        let name = shape.group(g);
        let Some(rg) = r.groups.iter().find(|x| x.group_id.as_str() == name) else {
            bail!("no answer for group {name}")
        };
        if rg.error_code != 0 {
            out.push((rg.error_code, false));
            continue;
        }
        let want = shape.rounds(g);
        let wanted = partitions(g);
        let mut ok = true;
        let mut code = 0;
        let mut seen = 0;
        for p in rg.topics.iter().flat_map(|t| t.partitions.iter()) {
            seen += 1;
            if p.error_code != 0 && code == 0 {
                code = p.error_code;
            }
            let expected = offset(want, p.partition_index);
            if p.committed_offset != expected && p.error_code == 0 {
                ok = false;
                wrong.get_or_insert_with(|| {
                    format!(
                        "group {name} partition {}: offset {} (round {}), the history's last is {expected} (round {want})",
                        p.partition_index,
                        p.committed_offset,
                        p.committed_offset.div_euclid(1_000_000)
                    )
                });
            }
        }
        if seen != wanted.len() {
            ok = false;
            wrong.get_or_insert_with(|| {
                format!(
                    "group {name}: {seen} partitions answered, {} asked",
                    wanted.len()
                )
            });
        }
        out.push((code, ok));
    }
    Ok((out, wrong))
}

fn probe(a: &ProbeArgs) -> anyhow::Result<Value> {
    let shape = &a.shape;
    shape.validate()?;
    let addr = shape.addr()?;
    let start = process_start_secs(a.pid)?;
    let since = || boottime_secs() - start;
    let probe_started = since();
    let deadline = Instant::now() + Duration::from_secs(a.timeout_secs);
    let pause = Duration::from_millis(a.poll_ms);
    let mut codes: BTreeMap<String, u64> = BTreeMap::new();
    let mut listen_s = None;
    let mut first_s = None;
    let mut all_s = None;
    let mut polls = 0u64;
    let mut corr = 0i32;
    let mut st: Option<TcpStream> = None;
    let mut pending: Vec<usize> = (0..shape.groups).collect();
    while all_s.is_none() {
        ensure!(
            Instant::now() < deadline,
            "no answer within {} s (first group answered: {:?} s; {} groups still loading; codes {codes:?})",
            a.timeout_secs,
            first_s,
            pending.len()
        );
        let conn = match st.as_mut() {
            Some(c) => c,
            None => match TcpStream::connect_timeout(&addr, Duration::from_secs(2)) {
                Ok(c) => {
                    c.set_nodelay(true)?;
                    c.set_read_timeout(Some(Duration::from_secs(30)))?;
                    listen_s.get_or_insert_with(since);
                    st.insert(c)
                }
                Err(_) => {
                    std::thread::sleep(Duration::from_millis(5));
                    continue;
                }
            },
        };
        corr += 1;
        polls += 1;
        let res = if first_s.is_none() {
            let all: Vec<i32> = (0..shape.partitions).collect();
            fetch(shape, conn, corr, &[0], |_| all.clone())
        } else {
            let batch: Vec<usize> = pending.iter().copied().take(FETCH_BATCH).collect();
            fetch(shape, conn, corr, &batch, |g| {
                vec![(g % shape.partitions as usize) as i32]
            })
            .inspect(|(r, _)| {
                // Keep the groups that have not answered yet.
                let done: Vec<usize> = batch
                    .iter()
                    .zip(r)
                    .filter(|(_, (c, ok))| *c == 0 && *ok)
                    .map(|(&g, _)| g)
                    .collect();
                pending.retain(|g| !done.contains(g));
            })
        };
        match res {
            Err(_) => {
                // The broker closed the connection (still starting, or restarting): reconnect.
                st = None;
                std::thread::sleep(pause);
                continue;
            }
            Ok((r, wrong)) => {
                for &(code, ok) in &r {
                    if code != 0 {
                        *codes.entry(code.to_string()).or_default() += 1;
                        ensure!(NOT_YET.contains(&code), "OffsetFetch answered error {code}");
                    } else if !ok {
                        // A group that answers has loaded: its offsets will not change any more.
                        bail!(
                            "a group answered with offsets other than the history's last round \
                             (lost or reordered commits?): {}",
                            wrong.as_deref().unwrap_or("?")
                        );
                    }
                }
                if first_s.is_none() {
                    if r.first() == Some(&(0, true)) {
                        first_s = Some(since());
                    }
                } else if pending.is_empty() {
                    all_s = Some(since());
                }
                if all_s.is_none() && (first_s.is_none() || r.iter().any(|&(c, _)| c != 0)) {
                    std::thread::sleep(pause);
                }
            }
        }
    }
    let ms = |x: Option<f64>| x.map(|v| (v * 10_000.0).round() / 10.0);
    eprintln!(
        "offsets-history probe {}: listening at {:?} ms, first group at {:?} ms, all {} groups at {:?} ms after the process started",
        shape.target,
        ms(listen_s),
        ms(first_s),
        shape.groups,
        ms(all_s)
    );
    Ok(json!({
        "mode": "probe",
        "target": shape.target,
        "pid": a.pid,
        "groups": shape.groups,
        "partitions": shape.partitions,
        "records": shape.requests() * shape.partitions as u64,
        "probe_started_ms": ms(Some(probe_started)),
        "listening_ms": ms(listen_s),
        "first_group_ms": ms(first_s),
        "all_groups_ms": ms(all_s),
        "polls": polls,
        "not_yet_codes": codes,
        "clock": "from the broker process's start (/proc/PID/stat, 10 ms ticks) on CLOCK_BOOTTIME",
        "passed": all_s.is_some(),
    }))
}

fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    let (v, json_path) = match &cli.cmd {
        Cmd::Fill(a) => (fill(a)?, a.shape.json.clone()),
        Cmd::Probe(a) => (probe(a)?, a.shape.json.clone()),
    };
    let text = serde_json::to_string_pretty(&v)?;
    match json_path {
        Some(p) => std::fs::write(p, text + "\n")?,
        None => println!("{text}"),
    }
    if v["passed"] != json!(true) {
        eprintln!("offsets-history: failed");
        std::process::exit(1);
    }
    Ok(())
}
