//! hbflood: a minimal, pipelined Kafka Heartbeat v4 client for the macro benchmark.
//!
//! It opens `--connections` TCP connections to one broker and, with `--join`, first makes each
//! connection's member a real, stable member of its own classic group (JoinGroup v5, the
//! MEMBER_ID_REQUIRED rejoin, SyncGroup v3 as the group's leader). Without `--join` (the echo
//! server) it uses made-up member ids of the same length, so every server sees frames of the same
//! size. Then it runs phases on the same connections and members:
//!
//! - **saturation** (`--saturate-secs`): every connection keeps `--pipeline` Heartbeats in flight
//!   (closed loop per slot); reports responses/s and round-trip latency.
//! - **open loop** (`--rates R1,R2,...`, `--rate-secs`): Heartbeats at a fixed total rate,
//!   round-robin over the connections; latency from each request's *intended* send time
//!   (coordinated-omission correction). The loop busy-polls, so its own wake-ups are not
//!   charged to the server. A rate is skipped when it is above `--max-rate-fraction` of the
//!   saturation throughput just measured, and the sweep stops after a rate the server did not keep
//!   up with.
//!
//! `--request commit` sends synchronous-style OffsetCommit v8 instead (one partition of
//! `--topic`, generation -1 and no member id: the simple, group-less commit both Kafka and
//! Ringleader accept for an empty group), one group per connection, no join; the topic is created
//! first and the run waits until a probe commit succeeds. Every commit is acknowledged only once
//! the broker says so: after fdatasync on Ringleader (by default), from the page cache on a
//! one-node Kafka.
//!
//! `--find-coordinator` (clusters, where groups are coordinated by different nodes): each
//! connection goes to the broker FindCoordinator (asked of `--target`) names for its group, and
//! after a NOT_COORDINATOR / COORDINATOR_NOT_AVAILABLE answer it finds the coordinator again and
//! reconnects (the requests still in flight on the old connection are counted as errors). With
//! `--request commit` the topic is created on every broker connected to (a Ringleader cluster
//! keeps one topic registry per node) and every connection's own group is probed until a commit
//! succeeds. Without it every connection goes to `--target`, as on one broker.
//!
//! One mio (epoll) thread; pin it with `taskset`. `--server-pid` samples the server's CPU time
//! (/proc) over each measured window (comma-separated pids: their sum, e.g. a cluster's nodes). Results: a table on stderr and JSON (`--json PATH`, or
//! stdout). Exit 1 when more than 1% of heartbeats failed.

use anyhow::{bail, Context};
use bytes::Bytes;
use clap::Parser;
use hdrhistogram::Histogram;
use kafka_protocol::messages::join_group_request::JoinGroupRequestProtocol;
use kafka_protocol::messages::leave_group_request::MemberIdentity;
use kafka_protocol::messages::sync_group_request::SyncGroupRequestAssignment;
use kafka_protocol::messages::{
    ConsumerProtocolAssignment, ConsumerProtocolSubscription, GroupId, HeartbeatRequest,
    JoinGroupRequest, LeaveGroupRequest, SyncGroupRequest,
};
use kafka_protocol::protocol::Encodable;
use kafka_protocol::ResponseError;
use mio::net::TcpStream as MioStream;
use mio::{Events, Interest, Poll, Token};
use ringleader_macro_bench::{frame, read_frame, s, NOT_YET};
use serde_json::{json, Value};
use std::collections::{BTreeMap, VecDeque};
use std::io::{ErrorKind, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::os::fd::{FromRawFd, IntoRawFd};
use std::time::{Duration, Instant};
use wire::codec::decode_response;
use wire::{Request, Response};

/// The largest response frame accepted (its responses are small).
const MAX_RESPONSE: i32 = 64 << 20;

#[derive(Parser, Debug)]
#[command(about = "Pipelined Heartbeat v4 flood: round trips/s and open-loop latency")]
struct Args {
    /// Broker (or echo server), host:port.
    #[arg(long, default_value = "127.0.0.1:9092")]
    target: String,
    /// TCP connections (one member, in its own group, per connection).
    #[arg(long, default_value_t = 1000)]
    connections: usize,
    /// Join a real group per connection first (brokers). Without it, made-up member ids (echo).
    #[arg(long)]
    join: bool,
    /// Heartbeats in flight per connection in the saturation phase.
    #[arg(long, default_value_t = 1)]
    pipeline: usize,
    /// Length of the saturation phase, seconds (0 = skip).
    #[arg(long, default_value_t = 10.0)]
    saturate_secs: f64,
    /// Open-loop rates to sweep, requests/s, comma-separated (empty = none).
    #[arg(long, value_delimiter = ',')]
    rates: Vec<u64>,
    /// Length of each open-loop phase, seconds.
    #[arg(long, default_value_t = 5.0)]
    rate_secs: f64,
    /// Skip open-loop rates above this fraction of the measured saturation throughput.
    #[arg(long, default_value_t = 0.95)]
    max_rate_fraction: f64,
    /// Unmeasured warm-up before each phase, seconds.
    #[arg(long, default_value_t = 1.0)]
    warmup_secs: f64,
    /// Busy-poll in the saturation phase too (open-loop phases always busy-poll).
    #[arg(long)]
    busy_poll: bool,
    /// Group id prefix; a per-run suffix keeps runs against one broker apart.
    #[arg(long, default_value = "hbflood-g")]
    group_prefix: String,
    #[arg(long, default_value = "hbflood")]
    client_id: String,
    #[arg(long, default_value_t = 30000)]
    session_timeout_ms: i32,
    /// Rebalance timeout sent in JoinGroup (Tansu completes a join phase only when it expires).
    #[arg(long, default_value_t = 3000)]
    rebalance_timeout_ms: i32,
    /// Give up on joining after this many seconds.
    #[arg(long, default_value_t = 120)]
    join_timeout_secs: u64,
    /// Server process(es) to sample CPU time from (/proc/PID/stat) over each measured window;
    /// comma-separated pids are summed (a cluster's nodes).
    #[arg(long, value_delimiter = ',')]
    server_pid: Vec<u32>,
    /// A label copied into the JSON.
    #[arg(long, default_value = "")]
    label: String,
    /// Write the JSON result here (default: stdout).
    #[arg(long)]
    json: Option<std::path::PathBuf>,
    /// Do not send LeaveGroup at the end.
    #[arg(long)]
    no_leave: bool,
    /// What each request is: `heartbeat` (Heartbeat v4) or `commit` (OffsetCommit v8).
    #[arg(long, value_enum, default_value_t = RequestKind::Heartbeat)]
    request: RequestKind,
    /// The topic `--request commit` commits to (created if missing, 1 partition).
    #[arg(long, default_value = "hbflood-commits")]
    topic: String,
    /// Connect each group's connection to the coordinator FindCoordinator names for it (asked of
    /// --target), and find it again on NOT_COORDINATOR / COORDINATOR_NOT_AVAILABLE (clusters).
    #[arg(long)]
    find_coordinator: bool,
}

#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
enum RequestKind {
    Heartbeat,
    Commit,
}

const HB_KEY: i16 = 12;
const HB_VERSION: i16 = 4;
const JOIN_VERSION: i16 = 5;
const SYNC_VERSION: i16 = 3;
const LEAVE_VERSION: i16 = 3;
const COMMIT_KEY: i16 = 8;
const COMMIT_VERSION: i16 = 8;
const CREATE_TOPICS_KEY: i16 = 19;
const CREATE_TOPICS_VERSION: i16 = 5;
const CORR_OFFSET: usize = 8;

fn versioned<M: Encodable>(m: &M) -> Bytes {
    wire::consumer_protocol::encode(m, wire::consumer_protocol::VERSION)
}

/// One member per connection.
struct Member {
    group: String,
    member_id: String,
    generation: i32,
}

fn join_all(args: &Args, streams: &mut [TcpStream], run: &str) -> anyhow::Result<Vec<Member>> {
    let n = streams.len();
    let mut members: Vec<Member> = (0..n)
        .map(|i| Member {
            group: format!("{}{run}-{i}", args.group_prefix),
            member_id: String::new(),
            generation: -1,
        })
        .collect();
    let sub =
        versioned(&ConsumerProtocolSubscription::default().with_topics(vec![s("hbflood-t0")]));
    let assignment = versioned(&ConsumerProtocolAssignment::default());
    let join_req = |m: &Member| {
        Request::JoinGroup(
            JoinGroupRequest::default()
                .with_group_id(GroupId(s(&m.group)))
                .with_session_timeout_ms(args.session_timeout_ms)
                .with_rebalance_timeout_ms(args.rebalance_timeout_ms)
                .with_member_id(s(&m.member_id))
                .with_protocol_type(s("consumer"))
                .with_protocols(vec![JoinGroupRequestProtocol::default()
                    .with_name(s("range"))
                    .with_metadata(sub.clone())]),
        )
    };
    let mut pending: Vec<usize> = (0..n).collect();
    // A broker just started may still be loading its `__consumer_offsets` partitions: like a
    // real client, retry the retriable coordinator errors (for up to ~10 s) instead of failing.
    for attempt in 0..100 {
        let mut wait = false;
        for &i in &pending {
            let f = frame(
                &args.client_id,
                11,
                JOIN_VERSION,
                1 + attempt,
                &join_req(&members[i]),
            );
            streams[i].write_all(&f)?;
        }
        let mut again = Vec::new();
        for &i in &pending {
            let f = read_frame(&mut streams[i], MAX_RESPONSE)
                .with_context(|| format!("JoinGroup on conn {i}"))?;
            let Response::JoinGroup(r) = decode_response(11, JOIN_VERSION, &f)?.1 else {
                bail!("not a JoinGroup response")
            };
            match ResponseError::try_from_code(r.error_code) {
                None => {
                    members[i].member_id = r.member_id.to_string();
                    members[i].generation = r.generation_id;
                    if r.leader != r.member_id {
                        bail!("member {} of its own group is not the leader", r.member_id);
                    }
                }
                Some(ResponseError::MemberIdRequired) => {
                    members[i].member_id = r.member_id.to_string();
                    again.push(i);
                }
                Some(_) if NOT_YET.contains(&r.error_code) => {
                    again.push(i);
                    wait = true;
                }
                Some(_) => bail!("JoinGroup for {}: error {}", members[i].group, r.error_code),
            }
        }
        pending = again;
        if pending.is_empty() {
            break;
        }
        if wait {
            std::thread::sleep(Duration::from_millis(100));
        }
    }
    anyhow::ensure!(
        pending.is_empty(),
        "{} members still not joined",
        pending.len()
    );
    for (i, m) in members.iter().enumerate() {
        let req = Request::SyncGroup(
            SyncGroupRequest::default()
                .with_group_id(GroupId(s(&m.group)))
                .with_generation_id(m.generation)
                .with_member_id(s(&m.member_id))
                .with_assignments(vec![SyncGroupRequestAssignment::default()
                    .with_member_id(s(&m.member_id))
                    .with_assignment(assignment.clone())]),
        );
        streams[i].write_all(&frame(&args.client_id, 14, SYNC_VERSION, 10, &req))?;
    }
    for (i, st) in streams.iter_mut().enumerate() {
        let f = read_frame(st, MAX_RESPONSE).with_context(|| format!("SyncGroup on conn {i}"))?;
        let Response::SyncGroup(r) = decode_response(14, SYNC_VERSION, &f)?.1 else {
            bail!("not a SyncGroup response")
        };
        anyhow::ensure!(
            r.error_code == 0,
            "SyncGroup on conn {i}: error {}",
            r.error_code
        );
    }
    Ok(members)
}

fn leave_all(args: &Args, streams: &mut [TcpStream], members: &[Member]) {
    for (st, m) in streams.iter_mut().zip(members) {
        let req = Request::LeaveGroup(
            LeaveGroupRequest::default()
                .with_group_id(GroupId(s(&m.group)))
                .with_members(vec![
                    MemberIdentity::default().with_member_id(s(&m.member_id))
                ]),
        );
        let _ = st.write_all(&frame(&args.client_id, 13, LEAVE_VERSION, 99, &req));
    }
    for st in streams.iter_mut() {
        let _ = read_frame(st, MAX_RESPONSE);
    }
}

fn commit_request(group: &str, topic: &str, offset: i64) -> Request {
    use kafka_protocol::messages::offset_commit_request::{
        OffsetCommitRequestPartition, OffsetCommitRequestTopic,
    };
    use kafka_protocol::messages::{OffsetCommitRequest, TopicName};
    Request::OffsetCommit(
        OffsetCommitRequest::default()
            .with_group_id(GroupId(s(group)))
            .with_generation_id_or_member_epoch(-1)
            .with_member_id(s(""))
            .with_topics(vec![OffsetCommitRequestTopic::default()
                .with_name(TopicName(s(topic)))
                .with_partitions(vec![OffsetCommitRequestPartition::default()
                    .with_partition_index(0)
                    .with_committed_offset(offset)
                    .with_committed_metadata(Some(s("")))])]),
    )
}

fn commit_code(resp: &Response) -> anyhow::Result<i16> {
    match resp {
        Response::OffsetCommit(r) => Ok(r
            .topics
            .first()
            .and_then(|t| t.partitions.first())
            .map(|p| p.error_code)
            .unwrap_or(-1)),
        _ => bail!("not an OffsetCommit response"),
    }
}

/// `--request commit`: create the topic (already existing is fine) and wait until a commit to
/// it succeeds (Kafka elects the new partition's leader a moment after answering CreateTopics).
fn prepare_commits(args: &Args, st: &mut TcpStream, run: &str) -> anyhow::Result<()> {
    create_topic(args, st)?;
    let deadline = Instant::now() + Duration::from_secs(args.join_timeout_secs);
    let group = format!("{}{run}-probe", args.group_prefix);
    for corr in 2.. {
        let code = commit_once(args, st, &group, corr)?;
        if code == 0 {
            return Ok(());
        }
        // 14/15/16 COORDINATOR_LOAD_IN_PROGRESS / NOT_AVAILABLE / NOT_COORDINATOR: Kafka creates
        // `__consumer_offsets` on the first FindCoordinator, and loads it a moment later.
        if (14..=16).contains(&code) {
            use kafka_protocol::messages::FindCoordinatorRequest;
            let find =
                Request::FindCoordinator(FindCoordinatorRequest::default().with_key(s(&group)));
            st.write_all(&frame(&args.client_id, 10, 3, corr + 1_000_000, &find))?;
            read_frame(st, MAX_RESPONSE)?;
        }
        anyhow::ensure!(
            Instant::now() < deadline,
            "commits to {} still fail: error {code}",
            args.topic
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    unreachable!()
}

/// One blocking OffsetCommit (offset 0) for `group` on `st`: its error code.
fn commit_once(args: &Args, st: &mut TcpStream, group: &str, corr: i32) -> anyhow::Result<i16> {
    let req = commit_request(group, &args.topic, 0);
    st.write_all(&frame(
        &args.client_id,
        COMMIT_KEY,
        COMMIT_VERSION,
        corr,
        &req,
    ))?;
    let (_, resp) = decode_response(COMMIT_KEY, COMMIT_VERSION, &read_frame(st, MAX_RESPONSE)?)?;
    commit_code(&resp)
}

/// CreateTopics for `--topic` (1 partition) on `st`; TOPIC_ALREADY_EXISTS is fine.
fn create_topic(args: &Args, st: &mut TcpStream) -> anyhow::Result<()> {
    use kafka_protocol::messages::create_topics_request::CreatableTopic;
    use kafka_protocol::messages::{CreateTopicsRequest, TopicName};
    let create = Request::CreateTopics(
        CreateTopicsRequest::default()
            .with_topics(vec![CreatableTopic::default()
                .with_name(TopicName(s(&args.topic)))
                .with_num_partitions(1)
                .with_replication_factor(1)])
            .with_timeout_ms(30_000),
    );
    st.write_all(&frame(
        &args.client_id,
        CREATE_TOPICS_KEY,
        CREATE_TOPICS_VERSION,
        1,
        &create,
    ))?;
    let (_, resp) = decode_response(
        CREATE_TOPICS_KEY,
        CREATE_TOPICS_VERSION,
        &read_frame(st, MAX_RESPONSE)?,
    )?;
    if let Response::CreateTopics(r) = resp {
        let code = r.topics.first().map(|t| t.error_code).unwrap_or(-1);
        // 36 TOPIC_ALREADY_EXISTS
        anyhow::ensure!(
            code == 0 || code == 36,
            "CreateTopics {}: error {code}",
            args.topic
        );
    }
    Ok(())
}

const FIND_KEY: i16 = 10;
const FIND_VERSION: i16 = 3;

/// A blocking connection to `addr` (host:port), as every setup connection is made.
fn connect(addr: &str, read_timeout: Duration) -> anyhow::Result<TcpStream> {
    let a: SocketAddr = std::net::ToSocketAddrs::to_socket_addrs(addr)?
        .next()
        .with_context(|| format!("{addr} does not resolve"))?;
    let st = TcpStream::connect(a).with_context(|| format!("connect to {addr}"))?;
    st.set_nodelay(true)?;
    st.set_read_timeout(Some(read_timeout))?;
    Ok(st)
}

/// FindCoordinator v3 (a group key) asked on `st`: the coordinator's `host:port`. The not-yet
/// codes (a cluster still electing a leader, Kafka creating `__consumer_offsets`) are asked
/// again until `deadline`.
fn find_coordinator(
    client_id: &str,
    st: &mut TcpStream,
    group: &str,
    deadline: Instant,
) -> anyhow::Result<String> {
    use kafka_protocol::messages::FindCoordinatorRequest;
    for corr in 1.. {
        let find = Request::FindCoordinator(
            FindCoordinatorRequest::default()
                .with_key(s(group))
                .with_key_type(0),
        );
        st.write_all(&frame(client_id, FIND_KEY, FIND_VERSION, corr, &find))?;
        let (_, resp) = decode_response(FIND_KEY, FIND_VERSION, &read_frame(st, MAX_RESPONSE)?)?;
        let Response::FindCoordinator(r) = resp else {
            bail!("not a FindCoordinator response")
        };
        if r.error_code == 0 {
            return Ok(format!("{}:{}", r.host, r.port));
        }
        anyhow::ensure!(
            NOT_YET.contains(&r.error_code) && Instant::now() < deadline,
            "FindCoordinator {group}: error {}",
            r.error_code
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    unreachable!()
}

/// `--find-coordinator --request commit`: the topic on every broker connected to, then a commit
/// for each connection's own group until one succeeds, finding the coordinator again (and
/// reconnecting) after a not-yet answer.
fn prepare_group_commits(
    args: &Args,
    streams: &mut [TcpStream],
    addrs: &mut [String],
    groups: &[String],
) -> anyhow::Result<()> {
    let deadline = Instant::now() + Duration::from_secs(args.join_timeout_secs);
    let timeout = Duration::from_secs(args.join_timeout_secs);
    let mut created = std::collections::BTreeSet::new();
    for i in 0..streams.len() {
        for corr in 1.. {
            if created.insert(addrs[i].clone()) {
                create_topic(args, &mut streams[i])?;
            }
            let code = commit_once(args, &mut streams[i], &groups[i], corr)?;
            if code == 0 {
                break;
            }
            anyhow::ensure!(
                Instant::now() < deadline,
                "commits for {} to {} still fail: error {code}",
                groups[i],
                args.topic
            );
            if NOT_YET.contains(&code) {
                let mut b = connect(&args.target, timeout)?;
                addrs[i] = find_coordinator(&args.client_id, &mut b, &groups[i], deadline)?;
                streams[i] = connect(&addrs[i], timeout)?;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }
    Ok(())
}

struct Conn {
    stream: MioStream,
    /// The Heartbeat frame; the correlation id is patched in at `CORR_OFFSET`.
    hb: Vec<u8>,
    next_corr: i32,
    wbuf: Vec<u8>,
    wpos: usize,
    rbuf: Vec<u8>,
    filled: usize,
    /// (correlation id, start time ns): send time (closed loop) or intended time (open loop).
    inflight: VecDeque<(i32, u64)>,
    broken: bool,
    /// The broker this connection goes to (`host:port`).
    addr: String,
    /// `--find-coordinator`: answered NOT_COORDINATOR / COORDINATOR_NOT_AVAILABLE; find the
    /// coordinator again and reconnect before sending more.
    refind: bool,
    /// The slowest round trip recorded on this connection in the current phase, ns.
    max_ns: u64,
}

impl Conn {
    fn queue(&mut self, t: u64) {
        let corr = self.next_corr;
        self.next_corr = self.next_corr.wrapping_add(1);
        self.hb[CORR_OFFSET..CORR_OFFSET + 4].copy_from_slice(&corr.to_be_bytes());
        self.wbuf.extend_from_slice(&self.hb);
        self.inflight.push_back((corr, t));
    }

    fn flush(&mut self) -> std::io::Result<()> {
        while self.wpos < self.wbuf.len() {
            match self.stream.write(&self.wbuf[self.wpos..]) {
                Ok(0) => return Err(ErrorKind::WriteZero.into()),
                Ok(n) => self.wpos += n,
                Err(e) if e.kind() == ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        if self.wpos == self.wbuf.len() {
            self.wbuf.clear();
            self.wpos = 0;
        }
        Ok(())
    }
}

/// What a phase measured.
#[derive(Default)]
struct Tally {
    responses: u64,
    errors: u64,
    codes: BTreeMap<i16, u64>,
}

struct Clock(Instant);
impl Clock {
    fn ns(&self) -> u64 {
        self.0.elapsed().as_nanos() as u64
    }
}

fn proc_cpu_secs(pid: u32) -> Option<f64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let rest = &stat[stat.rfind(')')? + 2..];
    let f: Vec<&str> = rest.split_whitespace().collect();
    // fields 14 and 15 (utime, stime) are at 11 and 12 after the state field
    let ticks: f64 = f.get(11)?.parse::<f64>().ok()? + f.get(12)?.parse::<f64>().ok()?;
    // SAFETY: sysconf has no preconditions.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) } as f64;
    Some(ticks / hz)
}

fn self_cpu_secs() -> f64 {
    // SAFETY: getrusage writes into the struct we pass.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: valid pointer to a rusage.
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut ru) };
    let tv = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    tv(ru.ru_utime) + tv(ru.ru_stime)
}

struct Runner {
    /// The API key and version of every request (and so of every response).
    api: (i16, i16),
    poll: Poll,
    events: Events,
    conns: Vec<Conn>,
    clock: Clock,
    server_pid: Vec<u32>,
    /// Each connection's group.
    groups: Vec<String>,
    /// `--find-coordinator`: (bootstrap `host:port`, client id) to find coordinators again.
    find: Option<(String, String)>,
    /// Reconnections to a new coordinator in the current phase.
    relocations: u64,
}

enum Mode {
    Saturate { pipeline: usize, busy: bool },
    Rate { rate: u64 },
}

impl Runner {
    fn inflight(&self) -> usize {
        self.conns.iter().map(|c| c.inflight.len()).sum()
    }

    /// `--find-coordinator`: connection `i`'s group answered that it moved. Find its coordinator
    /// again (blocking: this only happens while leadership moves) and reconnect; the requests
    /// still in flight on the old connection are dropped and returned.
    fn relocate(&mut self, i: usize) -> anyhow::Result<VecDeque<(i32, u64)>> {
        let (target, client_id) = self
            .find
            .clone()
            .context("relocate without --find-coordinator")?;
        let deadline = Instant::now() + Duration::from_secs(30);
        let mut b = connect(&target, Duration::from_secs(30))?;
        let addr = find_coordinator(&client_id, &mut b, &self.groups[i], deadline)?;
        if addr == self.conns[i].addr {
            // The node that refused is still named: let the leadership settle a little.
            std::thread::sleep(Duration::from_millis(50));
        }
        let st = connect(&addr, Duration::from_secs(30))?;
        st.set_nonblocking(true)?;
        let mut stream = MioStream::from_std(st);
        let c = &mut self.conns[i];
        self.poll.registry().deregister(&mut c.stream)?;
        self.poll.registry().register(
            &mut stream,
            Token(i),
            Interest::READABLE | Interest::WRITABLE,
        )?;
        c.stream = stream;
        c.addr = addr;
        c.wbuf.clear();
        c.wpos = 0;
        c.filled = 0;
        c.refind = false;
        self.relocations += 1;
        Ok(std::mem::take(&mut c.inflight))
    }

    /// Read what is there on connection `i`; record responses whose start time is in
    /// [from, to); in closed loop, send a replacement for each response while `refill`.
    fn on_readable(
        &mut self,
        i: usize,
        hist: &mut Histogram<u64>,
        tally: &mut Tally,
        window: (u64, u64),
        refill: bool,
    ) -> anyhow::Result<()> {
        let find = self.find.is_some();
        let c = &mut self.conns[i];
        loop {
            if c.filled == c.rbuf.len() {
                let l = c.rbuf.len();
                c.rbuf.resize(l * 2, 0);
            }
            match c.stream.read(&mut c.rbuf[c.filled..]) {
                Ok(0) => {
                    c.broken = true;
                    bail!("connection {i} closed by the server");
                }
                Ok(n) => c.filled += n,
                Err(e) if e.kind() == ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(e) => {
                    c.broken = true;
                    return Err(e).context(format!("read on connection {i}"));
                }
            }
        }
        let now = self.clock.ns();
        let mut pos = 0;
        let mut got = 0usize;
        while c.filled - pos >= 4 {
            let len = i32::from_be_bytes(c.rbuf[pos..pos + 4].try_into().expect("4")) as usize;
            if c.filled - pos < 4 + len {
                break;
            }
            let f = &c.rbuf[pos + 4..pos + 4 + len];
            anyhow::ensure!(len >= 4, "short response frame");
            let corr = i32::from_be_bytes(f[0..4].try_into().expect("4"));
            let code = if self.api.0 == HB_KEY && len == 12 && f[4] == 0 {
                i16::from_be_bytes([f[9], f[10]])
            } else {
                match decode_response(self.api.0, self.api.1, &Bytes::copy_from_slice(f))? {
                    (_, Response::Heartbeat(r)) => r.error_code,
                    (_, r) => commit_code(&r)?,
                }
            };
            let Some((want, start)) = c.inflight.pop_front() else {
                bail!("response with correlation id {corr} but nothing in flight");
            };
            anyhow::ensure!(want == corr, "correlation id {corr}, expected {want}");
            // 15 COORDINATOR_NOT_AVAILABLE, 16 NOT_COORDINATOR: the group moved.
            if find && (code == 15 || code == 16) {
                c.refind = true;
            }
            if start >= window.0 && start < window.1 {
                tally.responses += 1;
                let rtt = now.saturating_sub(start).max(1);
                let _ = hist.record(rtt);
                c.max_ns = c.max_ns.max(rtt);
                if code != 0 {
                    tally.errors += 1;
                    *tally.codes.entry(code).or_default() += 1;
                }
            }
            pos += 4 + len;
            got += 1;
        }
        c.rbuf.copy_within(pos..c.filled, 0);
        c.filled -= pos;
        if refill && got > 0 && !c.refind {
            let t = self.clock.ns();
            for _ in 0..got {
                c.queue(t);
            }
        }
        if !c.wbuf.is_empty() {
            c.flush()
                .with_context(|| format!("write on connection {i}"))?;
        }
        Ok(())
    }

    fn poll_once(&mut self, timeout: Option<Duration>) -> anyhow::Result<Vec<(usize, bool, bool)>> {
        self.poll.poll(&mut self.events, timeout).or_else(|e| {
            if e.kind() == ErrorKind::Interrupted {
                Ok(())
            } else {
                Err(e)
            }
        })?;
        Ok(self
            .events
            .iter()
            .map(|e| {
                (
                    e.token().0,
                    e.is_readable() || e.is_read_closed(),
                    e.is_writable(),
                )
            })
            .collect())
    }

    fn run_phase(&mut self, mode: &Mode, warmup: f64, secs: f64) -> anyhow::Result<Value> {
        let mut hist = Histogram::<u64>::new_with_bounds(1, 120_000_000_000, 3)?;
        let mut tally = Tally::default();
        let start = self.clock.ns();
        let from = start + (warmup * 1e9) as u64;
        let to = from + (secs * 1e9) as u64;
        let mut cpu0: Option<(f64, Option<f64>)> = None;
        let mut cpu1: Option<(f64, Option<f64>)> = None;
        let sample = |pids: &[u32]| {
            let server = if pids.is_empty() {
                None
            } else {
                pids.iter().map(|&p| proc_cpu_secs(p)).sum::<Option<f64>>()
            };
            (self_cpu_secs(), server)
        };
        self.relocations = 0;
        for c in self.conns.iter_mut() {
            c.max_ns = 0;
        }
        let n = self.conns.len();
        let (mut slot, interval_ns) = match mode {
            Mode::Saturate { pipeline, .. } => {
                let t = self.clock.ns();
                for c in self.conns.iter_mut() {
                    for _ in 0..*pipeline {
                        c.queue(t);
                    }
                    c.flush()?;
                }
                (0u64, 0f64)
            }
            Mode::Rate { rate } => (0u64, 1e9 / *rate as f64),
        };
        let busy = match mode {
            Mode::Saturate { busy, .. } => *busy,
            Mode::Rate { .. } => true,
        };
        let mut late = 0u64;
        let mut dirty: Vec<usize> = Vec::new();
        loop {
            let now = self.clock.ns();
            if cpu0.is_none() && now >= from {
                cpu0 = Some(sample(&self.server_pid));
            }
            if cpu1.is_none() && now >= to {
                cpu1 = Some(sample(&self.server_pid));
            }
            let sending = now < to;
            if !sending && self.inflight() == 0 {
                break;
            }
            if !sending && now > to + 30_000_000_000 {
                bail!(
                    "{} responses still missing 30 s after the phase",
                    self.inflight()
                );
            }
            if let Mode::Rate { .. } = mode {
                if sending {
                    loop {
                        let t = start + (slot as f64 * interval_ns) as u64;
                        if t > now || t >= to {
                            break;
                        }
                        let i = (slot % n as u64) as usize;
                        if now - t > 1_000_000 {
                            late += 1;
                        }
                        self.conns[i].queue(t);
                        dirty.push(i);
                        slot += 1;
                    }
                    for &i in &dirty {
                        self.conns[i].flush()?;
                    }
                    dirty.clear();
                }
            }
            let timeout = if busy {
                Some(Duration::ZERO)
            } else {
                Some(Duration::from_millis(5))
            };
            for (i, r, w) in self.poll_once(timeout)? {
                if r {
                    let refill = matches!(mode, Mode::Saturate { .. }) && self.clock.ns() < to;
                    self.on_readable(i, &mut hist, &mut tally, (from, to), refill)?;
                    if self.conns[i].refind {
                        // In flight on the old connection: counted as errors (code -1).
                        for (_, start) in self.relocate(i)? {
                            if start >= from && start < to {
                                tally.responses += 1;
                                tally.errors += 1;
                                *tally.codes.entry(-1).or_default() += 1;
                            }
                        }
                        if let Mode::Saturate { pipeline, .. } = mode {
                            let t = self.clock.ns();
                            if t < to {
                                for _ in 0..*pipeline {
                                    self.conns[i].queue(t);
                                }
                                self.conns[i].flush()?;
                            }
                        }
                        continue;
                    }
                }
                if w && !self.conns[i].wbuf.is_empty() {
                    self.conns[i].flush()?;
                }
            }
        }
        let (c0, s0) = cpu0.unwrap_or((0.0, None));
        let (c1, s1) = cpu1.unwrap_or((0.0, None));
        let q = |p: f64| hist.value_at_quantile(p) as f64 / 1000.0;
        let mut v = json!({
            "responses": tally.responses,
            "throughput_rps": tally.responses as f64 / secs,
            "errors": tally.errors,
            "error_codes": tally.codes.iter().map(|(k, v)| (k.to_string(), *v)).collect::<BTreeMap<_, _>>(),
            "latency_us": {
                "p50": q(0.5), "p90": q(0.9), "p99": q(0.99), "p999": q(0.999),
                "max": hist.max() as f64 / 1000.0, "mean": hist.mean() / 1000.0,
            },
            "client_cpu": (c1 - c0) / secs,
            "seconds": secs,
        });
        if self.find.is_some() {
            v["relocations"] = json!(self.relocations);
        }
        // Where the tail is: the three connections with the slowest round trip (their group and
        // broker), so a stall can be told apart from an evenly slow broker.
        let mut slow: Vec<usize> = (0..n).collect();
        slow.sort_by_key(|&i| std::cmp::Reverse(self.conns[i].max_ns));
        v["slowest_connections"] = json!(slow
            .iter()
            .take(3)
            .map(|&i| json!({
                "connection": i,
                "group": self.groups[i],
                "broker": self.conns[i].addr,
                "max_ms": self.conns[i].max_ns as f64 / 1e6,
            }))
            .collect::<Vec<_>>());
        if let (Some(a), Some(b)) = (s0, s1) {
            v["server_cpu"] = json!((b - a) / secs);
        }
        match mode {
            Mode::Saturate { pipeline, busy } => {
                v["mode"] = json!("saturate");
                v["pipeline"] = json!(pipeline);
                v["busy_poll"] = json!(busy);
            }
            Mode::Rate { rate } => {
                v["mode"] = json!("rate");
                v["rate"] = json!(rate);
                v["late_sends"] = json!(late);
            }
        }
        Ok(v)
    }
}

fn describe(v: &Value) -> String {
    let l = &v["latency_us"];
    let f = |x: &Value| x.as_f64().unwrap_or(0.0);
    format!(
        "{:>10.0} resp/s  p50 {:>8.1} us  p99 {:>8.1} us  p99.9 {:>8.1} us  errors {}  client cpu {:.0}%{}",
        f(&v["throughput_rps"]),
        f(&l["p50"]),
        f(&l["p99"]),
        f(&l["p999"]),
        v["errors"],
        100.0 * f(&v["client_cpu"]),
        v.get("server_cpu")
            .map(|c| format!("  server cpu {:.0}%", 100.0 * f(c)))
            .unwrap_or_default()
    )
}

fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    anyhow::ensure!(args.connections > 0, "--connections must be positive");
    let addr: SocketAddr = std::net::ToSocketAddrs::to_socket_addrs(&args.target)?
        .next()
        .context("target does not resolve")?;
    let run = format!(
        "{:x}",
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)?
            .as_millis()
            % 0xffff_ffff
    );
    let groups: Vec<String> = (0..args.connections)
        .map(|i| format!("{}{run}-{i}", args.group_prefix))
        .collect();
    let timeout = Duration::from_secs(args.join_timeout_secs);
    let mut streams = Vec::with_capacity(args.connections);
    let mut addrs = Vec::with_capacity(args.connections);
    if args.find_coordinator {
        // Each group's connection goes to its coordinator, as a client's would.
        let mut bootstrap = connect(&args.target, timeout)?;
        let deadline = Instant::now() + timeout;
        for g in &groups {
            let a = find_coordinator(&args.client_id, &mut bootstrap, g, deadline)?;
            streams.push(connect(&a, timeout).with_context(|| format!("coordinator of {g}"))?);
            addrs.push(a);
        }
    } else {
        for i in 0..args.connections {
            let st = TcpStream::connect(addr).with_context(|| format!("connect #{i} to {addr}"))?;
            st.set_nodelay(true)?;
            st.set_read_timeout(Some(timeout))?;
            streams.push(st);
            addrs.push(args.target.clone());
        }
    }
    let commits = args.request == RequestKind::Commit;
    anyhow::ensure!(
        !(commits && args.join),
        "--request commit uses group-less commits: no --join"
    );
    if commits && args.find_coordinator {
        prepare_group_commits(&args, &mut streams, &mut addrs, &groups)?;
    } else if commits {
        prepare_commits(&args, &mut streams[0], &run)?;
    }
    let mut coordinators = BTreeMap::<String, usize>::new();
    for a in &addrs {
        *coordinators.entry(a.clone()).or_default() += 1;
    }
    if args.find_coordinator {
        eprintln!("hbflood: connections per coordinator: {coordinators:?}");
    }
    let t_join = Instant::now();
    let members = if args.join {
        join_all(&args, &mut streams, &run)?
    } else {
        (0..args.connections)
            .map(|i| Member {
                group: format!("{}{run}-{i}", args.group_prefix),
                member_id: format!("{}-{:08x}-0000-4000-8000-{:012x}", args.client_id, i, i),
                generation: 1,
            })
            .collect()
    };
    let join_ms = t_join.elapsed().as_secs_f64() * 1000.0;
    if args.join {
        eprintln!(
            "hbflood: {} members joined their groups in {:.0} ms",
            members.len(),
            join_ms
        );
    }
    let poll = Poll::new()?;
    let mut conns = Vec::with_capacity(streams.len());
    for (i, ((st, m), a)) in streams.into_iter().zip(&members).zip(addrs).enumerate() {
        st.set_nonblocking(true)?;
        let mut stream = MioStream::from_std(st);
        poll.registry().register(
            &mut stream,
            Token(i),
            Interest::READABLE | Interest::WRITABLE,
        )?;
        let hb = if commits {
            frame(
                &args.client_id,
                COMMIT_KEY,
                COMMIT_VERSION,
                0,
                &commit_request(&m.group, &args.topic, 42),
            )
        } else {
            frame(
                &args.client_id,
                HB_KEY,
                HB_VERSION,
                0,
                &Request::Heartbeat(
                    HeartbeatRequest::default()
                        .with_group_id(GroupId(s(&m.group)))
                        .with_generation_id(m.generation)
                        .with_member_id(s(&m.member_id)),
                ),
            )
        }
        .to_vec();
        conns.push(Conn {
            stream,
            hb,
            next_corr: 1000,
            wbuf: Vec::with_capacity(4096),
            wpos: 0,
            rbuf: vec![0u8; 16 * 1024],
            filled: 0,
            inflight: VecDeque::new(),
            broken: false,
            addr: a,
            refind: false,
            max_ns: 0,
        });
    }
    let frame_bytes = conns[0].hb.len();
    let mut r = Runner {
        api: if commits {
            (COMMIT_KEY, COMMIT_VERSION)
        } else {
            (HB_KEY, HB_VERSION)
        },
        poll,
        events: Events::with_capacity(4096),
        conns,
        clock: Clock(Instant::now()),
        server_pid: args.server_pid.clone(),
        groups,
        find: args
            .find_coordinator
            .then(|| (args.target.clone(), args.client_id.clone())),
        relocations: 0,
    };
    let mut phases = Vec::new();
    let mut failed = false;
    let mut sat_rps = None;
    if args.saturate_secs > 0.0 {
        let mode = Mode::Saturate {
            pipeline: args.pipeline.max(1),
            busy: args.busy_poll,
        };
        let v = r.run_phase(&mode, args.warmup_secs, args.saturate_secs)?;
        eprintln!(
            "hbflood {} saturation, {} conns x {} in flight: {}",
            args.target,
            args.connections,
            args.pipeline,
            describe(&v)
        );
        sat_rps = v["throughput_rps"].as_f64();
        phases.push(v);
    }
    for &rate in &args.rates {
        if let Some(sat) = sat_rps {
            if rate as f64 > sat * args.max_rate_fraction {
                eprintln!(
                    "hbflood {}: skipping rate {rate}/s (> {:.0}% of saturation {sat:.0}/s)",
                    args.target,
                    args.max_rate_fraction * 100.0
                );
                continue;
            }
        }
        let v = r.run_phase(&Mode::Rate { rate }, args.warmup_secs, args.rate_secs)?;
        eprintln!(
            "hbflood {} rate {:>7}/s: {}",
            args.target,
            rate,
            describe(&v)
        );
        let kept_up = v["throughput_rps"].as_f64().unwrap_or(0.0) >= 0.9 * rate as f64
            && v["latency_us"]["p99"].as_f64().unwrap_or(0.0) < 100_000.0;
        phases.push(v);
        if !kept_up {
            eprintln!(
                "hbflood {}: did not keep up at {rate}/s; stopping the sweep",
                args.target
            );
            break;
        }
    }
    for p in &phases {
        let resp = p["responses"].as_u64().unwrap_or(0);
        let err = p["errors"].as_u64().unwrap_or(0);
        if resp > 0 && err * 100 > resp {
            failed = true;
        }
    }
    if args.join && !args.no_leave {
        let streams: Vec<TcpStream> = r
            .conns
            .drain(..)
            .filter(|c| !c.broken && c.inflight.is_empty())
            .map(|c| {
                let fd = c.stream.into_raw_fd();
                // SAFETY: the fd came from into_raw_fd just above; we own it now.
                let st = unsafe { TcpStream::from_raw_fd(fd) };
                let _ = st.set_nonblocking(false);
                let _ = st.set_read_timeout(Some(Duration::from_secs(5)));
                st
            })
            .collect();
        let mut streams = streams;
        if streams.len() == members.len() {
            leave_all(&args, &mut streams, &members);
        }
    }
    let out = json!({
        "label": args.label,
        "target": args.target,
        "connections": args.connections,
        "joined": args.join,
        "join_ms": join_ms,
        "request": if commits { "commit" } else { "heartbeat" },
        "find_coordinator": args.find_coordinator,
        "connections_per_broker": coordinators,
        "heartbeat_frame_bytes": frame_bytes,
        "phases": phases,
        "passed": !failed,
    });
    let text = serde_json::to_string_pretty(&out)?;
    match &args.json {
        Some(p) => std::fs::write(p, text + "\n")?,
        None => println!("{text}"),
    }
    if failed {
        eprintln!("hbflood: more than 1% of heartbeats failed");
        std::process::exit(1);
    }
    Ok(())
}
