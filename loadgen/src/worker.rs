//! One worker thread: a non-blocking event loop (mio/epoll) that owns a subset of the shared
//! connections, the members multiplexed over them, and a pool of JoinGroup/SyncGroup connections.
//!
//! Loop, per iteration: fire due timers (member timers, start-up ramp, churn, open-loop slots),
//! write every connection with pending bytes, wait in `epoll` until the next deadline, read what
//! arrived, match each response to its request by correlation id (brokers answer in order per
//! connection, so it is normally the oldest in flight), record its latency and feed it to the
//! member, whose answer (more requests, timers) is queued and sent on the next write pass.
//!
//! Why two kinds of connection: a broker may hold a JoinGroup until the join phase ends, and a
//! follower's SyncGroup until the leader syncs. Responses leave a connection in request order, so
//! a parked request would hold back every response behind it, including the heartbeat that tells
//! another member to rejoin — a cycle that only the rebalance timeout breaks (and Apache Kafka
//! does not even read the next request of a connection until it has answered the current one).
//! So JoinGroup and SyncGroup go on pool connections carrying one request at a time; everything
//! else (Heartbeat, OffsetCommit, OffsetFetch, LeaveGroup — all answered promptly) is pipelined
//! on the shared connections.

use crate::api::{client_error, Api, Versions};
use crate::assign::TopicInfo;
use crate::converge::{GroupAgg, GroupReport, LateView, MemberTimes, RunControl, REPORT_EVERY_US};
use crate::member::{Action, Ctx, MemberCfg, MemberMachine, Micros, TimerKind};
use crate::net::{encode_frame, split_frame};
use crate::stats::{IntervalReport, Stats};
use crate::timerfd::PreciseTimer;
use crate::tls::{Stream as TcpStream, TlsClient};
use bytes::{Buf, Bytes, BytesMut};
use kafka_protocol::messages::GroupId;
use mio::unix::SourceFd;
use mio::{Events, Interest, Poll, Token};
use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap, VecDeque};
use std::io::{self, Read, Write};
use std::net::SocketAddr;
use std::sync::atomic::Ordering;
use std::sync::mpsc::Sender;
use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};
use wire::{Request, Response};

/// Everything a worker is given.
pub struct WorkerSetup {
    pub index: usize,
    /// Global indices of the members this worker owns.
    pub members: Vec<u32>,
    pub members_per_group: usize,
    pub total_members: usize,
    /// Group ids (deep copies for this thread) and each group's coordinator index.
    pub groups: Vec<GroupId>,
    pub group_coord: Vec<u16>,
    pub addrs: Vec<SocketAddr>,
    pub topics: Vec<TopicInfo>,
    pub subscription: Bytes,
    pub cfg: MemberCfg,
    pub versions: Versions,
    /// Shared connections across all workers (member m uses connection m mod this).
    pub shared_connections: usize,
    pub client_id: String,
    /// `--tls-ca`: every connection is TLS.
    pub tls: Option<Arc<TlsClient>>,
    pub max_in_flight: usize,
    pub request_timeout_us: Micros,
    pub rebalance_request_timeout_us: Micros,
    /// This worker's share of the churn rate (per second) and of the open-loop rate.
    pub churn_per_s: f64,
    pub rate_per_s: Option<f64>,
    pub duration_us: Micros,
    pub ramp_us: Micros,
    pub drain_us: Micros,
    pub leave_on_exit: bool,
    /// The members send JoinGroup/SyncGroup (classic): open the pool before the clock starts.
    pub prewarm_pool: bool,
    /// Busy-poll this long after the last socket event while requests are in flight.
    pub spin_us: Micros,
    pub reports: Sender<IntervalReport>,
    pub start: Arc<Barrier>,
    /// Members with this global index or above are late joiners (`--late-joiners`): members of
    /// group 0 that start only when the main thread releases them, in index order.
    pub late_from: u32,
    /// Convergence tracking (`--until-stable`, `--late-joiners`): per-group aggregates go here
    /// every `converge::REPORT_EVERY_US`, and the final report carries every member's times.
    pub group_reports: Option<Sender<GroupReport>>,
    pub control: Arc<RunControl>,
}

#[derive(Debug, Clone, Copy)]
struct InFlight {
    corr: i32,
    member: u32,
    api: Api,
    version: i16,
    epoch: u32,
    /// Latency is measured from here: the send time, or the intended send time (open loop).
    start_us: Micros,
    /// When it was handed to the connection (for timeouts).
    queued_us: Micros,
}

struct Conn {
    stream: Option<TcpStream>,
    addr: u16,
    pooled: bool,
    rbuf: BytesMut,
    wbuf: BytesMut,
    inflight: VecDeque<InFlight>,
    /// Shared connections: encoded requests waiting for the in-flight window.
    backlog: VecDeque<(InFlight, Bytes)>,
    next_corr: i32,
    dirty: bool,
    /// Shared connection that is down: next reconnect attempt.
    retry_at_us: Micros,
    /// Pool connection: when it last went idle.
    idle_since_us: Micros,
}

struct Slot<M> {
    m: M,
    global: u32,
    group: u32,
    shared_conn: u32,
    stable: bool,
    ever_stable: bool,
    /// When the member first started (None: not yet, e.g. a late joiner not yet released).
    started_us: Option<Micros>,
    /// Convergence tracking: the member's owned-partition count as last seen, and when it or
    /// `stable` last changed.
    owned_n: u32,
    last_change_us: Micros,
    /// Late joiners: their release order.
    late: Option<u32>,
}

/// Idle JoinGroup/SyncGroup connections kept open per worker at least, and how long an idle
/// one beyond that reserve lives.
const POOL_IDLE_RESERVE: usize = 64;
const POOL_IDLE_US: Micros = 10_000_000;
/// JoinGroup/SyncGroup connections opened before the run starts, per worker, at most.
const POOL_PREWARM_MAX: usize = 4096;

/// The poll token of the precise timer (connections use their index).
const TIMER_TOKEN: Token = Token(usize::MAX);

/// Heap entry: (due, member, timer code, member epoch).
type TimerEntry = Reverse<(Micros, u32, u8, u32)>;
const T_HEARTBEAT: u8 = 0;
const T_COMMIT: u8 = 1;
const T_RETRY: u8 = 2;
const T_START: u8 = 3;

fn timer_code(k: TimerKind) -> u8 {
    match k {
        TimerKind::Heartbeat => T_HEARTBEAT,
        TimerKind::Commit => T_COMMIT,
        TimerKind::Retry => T_RETRY,
    }
}

/// The immutable context members build requests from.
struct Shared {
    cfg: MemberCfg,
    versions: Versions,
    groups: Vec<GroupId>,
    topics: Vec<TopicInfo>,
    subscription: Bytes,
}

impl Shared {
    fn ctx(&self, group: u32) -> Ctx<'_> {
        Ctx {
            cfg: &self.cfg,
            versions: &self.versions,
            group_id: &self.groups[group as usize],
            topics: &self.topics,
            subscription: &self.subscription,
        }
    }
}

pub struct Worker<M> {
    idx: usize,
    shared: Shared,
    slots: Vec<Slot<M>>,
    conns: Vec<Option<Conn>>,
    free_conn_ids: Vec<usize>,
    /// Pool connections with nothing in flight, per coordinator.
    pool_free: Vec<VecDeque<usize>>,
    pool_open: usize,
    pool_peak: usize,
    shared_ids: Vec<usize>,
    addrs: Vec<SocketAddr>,
    poll: Poll,
    timer: PreciseTimer,
    timers: BinaryHeap<TimerEntry>,
    /// (member, action, latency start if not "now", the member's epoch when it asked).
    queue: VecDeque<(u32, Action, Option<Micros>, u32)>,
    scratch: Vec<Action>,
    dirty: Vec<usize>,
    read_buf: Vec<u8>,
    stats: Stats,
    stable: u32,
    ever_stable: u32,
    client_id: String,
    tls: Option<Arc<TlsClient>>,
    max_in_flight: usize,
    request_timeout_us: Micros,
    rebalance_request_timeout_us: Micros,
    outstanding_shared: usize,
    rate_late: u64,
    rate_idle: u64,
    t0: Instant,
    /// Convergence tracking is on: stamp member changes.
    track: bool,
    /// Late joiners not yet started, in release order (slot indices).
    dormant: VecDeque<u32>,
}

/// Connect (and with TLS, run the whole handshake, blocking: at most 10 s).
fn connect(addr: SocketAddr, tls: Option<&TlsClient>) -> io::Result<TcpStream> {
    let mut s = std::net::TcpStream::connect_timeout(&addr, Duration::from_secs(10))?;
    s.set_nodelay(true)?;
    let session = match tls {
        Some(t) => {
            s.set_read_timeout(Some(Duration::from_secs(10)))?;
            Some(t.handshake(&mut s)?)
        }
        None => None,
    };
    TcpStream::new(s, session)
}

/// Connect and make one ApiVersions v0 round trip before the run starts, as Kafka clients do on
/// every new connection. A `connect()` returns once the kernel has the handshake, even if the
/// broker's accept queue overflowed and dropped it, in which case the first request would wait
/// for a SYN-ACK retransmit (a second or more) and be measured as broker latency.
fn connect_checked(
    addr: SocketAddr,
    client_id: &str,
    tls: Option<&TlsClient>,
) -> io::Result<TcpStream> {
    let mut s = std::net::TcpStream::connect_timeout(&addr, Duration::from_secs(10))?;
    s.set_nodelay(true)?;
    s.set_read_timeout(Some(Duration::from_secs(30)))?;
    let req = Request::ApiVersions(kafka_protocol::messages::ApiVersionsRequest::default());
    let mut out = BytesMut::new();
    encode_frame(&mut out, Api::ApiVersions.key(), 0, 0, client_id, &req)
        .map_err(io::Error::other)?;
    let mut buf = BytesMut::new();
    let session = match tls {
        None => {
            s.write_all(&out)?;
            crate::net::read_frame(&mut s, &mut buf).map_err(io::Error::other)?;
            None
        }
        Some(t) => {
            let mut session = t.handshake(&mut s)?;
            let mut io = rustls::Stream::new(&mut session, &mut s);
            io.write_all(&out)?;
            crate::net::read_frame(&mut io, &mut buf).map_err(io::Error::other)?;
            Some(session)
        }
    };
    TcpStream::new(s, session)
}

/// The first non-zero error code anywhere in a response (0 if none).
pub fn response_code(resp: &Response) -> i16 {
    fn first(it: impl IntoIterator<Item = i16>) -> i16 {
        it.into_iter().find(|&c| c != 0).unwrap_or(0)
    }
    match resp {
        Response::Heartbeat(r) => r.error_code,
        Response::JoinGroup(r) => r.error_code,
        Response::SyncGroup(r) => r.error_code,
        Response::ConsumerGroupHeartbeat(r) => r.error_code,
        Response::LeaveGroup(r) => {
            first(std::iter::once(r.error_code).chain(r.members.iter().map(|m| m.error_code)))
        }
        Response::OffsetCommit(r) => first(
            r.topics
                .iter()
                .flat_map(|t| t.partitions.iter().map(|p| p.error_code)),
        ),
        Response::OffsetFetch(r) => first(
            std::iter::once(r.error_code)
                .chain(r.groups.iter().map(|g| g.error_code))
                .chain(r.groups.iter().flat_map(|g| {
                    g.topics
                        .iter()
                        .flat_map(|t| t.partitions.iter().map(|p| p.error_code))
                }))
                .chain(
                    r.topics
                        .iter()
                        .flat_map(|t| t.partitions.iter().map(|p| p.error_code)),
                ),
        ),
        _ => 0,
    }
}

/// Run a worker to completion. `make` builds a member from its global index.
pub fn run<M: MemberMachine>(setup: WorkerSetup, make: impl Fn(u32) -> M) {
    let reports = setup.reports.clone();
    let index = setup.index;
    let start = setup.start.clone();
    match Worker::new(&setup, make) {
        Ok(mut w) => {
            start.wait();
            w.t0 = Instant::now();
            w.timer.reset_base();
            w.run_loop(&setup);
        }
        Err(e) => {
            start.wait();
            let _ = reports.send(IntervalReport {
                worker: index,
                stats: Stats::default(),
                stable: 0,
                members: setup.members.len() as u32,
                ever_stable: 0,
                shared_conns: 0,
                pool_conns: 0,
                pool_peak: 0,
                rate_late_slots: 0,
                rate_idle_slots: 0,
                draining: false,
                stable_at_end: Some(0),
                owned_at_end: Vec::new(),
                finished: true,
                fatal: Some(format!("worker {index}: {e:#}")),
                member_times: Vec::new(),
            });
        }
    }
}

impl<M: MemberMachine> Worker<M> {
    fn new(s: &WorkerSetup, make: impl Fn(u32) -> M) -> anyhow::Result<Self> {
        let poll = Poll::new()?;
        let timer = PreciseTimer::new()?;
        poll.registry().register(
            &mut SourceFd(&timer.raw_fd()),
            TIMER_TOKEN,
            Interest::READABLE,
        )?;
        let mut w = Worker {
            idx: s.index,
            shared: Shared {
                cfg: s.cfg.clone(),
                versions: s.versions.clone(),
                groups: s.groups.clone(),
                topics: s.topics.clone(),
                subscription: s.subscription.clone(),
            },
            slots: Vec::with_capacity(s.members.len()),
            conns: Vec::new(),
            free_conn_ids: Vec::new(),
            pool_free: vec![VecDeque::new(); s.addrs.len()],
            pool_open: 0,
            pool_peak: 0,
            shared_ids: Vec::new(),
            addrs: s.addrs.clone(),
            poll,
            timer,
            timers: BinaryHeap::new(),
            queue: VecDeque::new(),
            scratch: Vec::new(),
            dirty: Vec::new(),
            read_buf: vec![0; 256 * 1024],
            stats: Stats::default(),
            stable: 0,
            ever_stable: 0,
            client_id: s.client_id.clone(),
            tls: s.tls.clone(),
            max_in_flight: s.max_in_flight,
            request_timeout_us: s.request_timeout_us,
            rebalance_request_timeout_us: s.rebalance_request_timeout_us,
            outstanding_shared: 0,
            rate_late: 0,
            rate_idle: 0,
            t0: Instant::now(),
            track: s.group_reports.is_some(),
            dormant: VecDeque::new(),
        };
        // Shared connections: one per (coordinator, connection number) that our members use.
        let mut by_key: HashMap<(u16, u32), usize> = HashMap::new();
        for &g in &s.members {
            let late = g.checked_sub(s.late_from);
            let group = if late.is_some() {
                0
            } else {
                g as usize / s.members_per_group
            };
            let coord = s.group_coord[group];
            let c = (g as usize % s.shared_connections) as u32;
            let conn = match by_key.get(&(coord, c)) {
                Some(&id) => id,
                None => {
                    let stream =
                        connect_checked(s.addrs[coord as usize], &s.client_id, s.tls.as_deref())
                            .map_err(|e| {
                                anyhow::anyhow!("connecting to {}: {e}", s.addrs[coord as usize])
                            })?;
                    let id = w.add_conn(stream, coord, false)?;
                    by_key.insert((coord, c), id);
                    w.shared_ids.push(id);
                    id
                }
            };
            w.slots.push(Slot {
                m: make(g),
                global: g,
                group: group as u32,
                shared_conn: conn as u32,
                stable: false,
                ever_stable: false,
                started_us: None,
                owned_n: 0,
                last_change_us: 0,
                late,
            });
        }
        // Every member joins at start-up and each needs a JoinGroup connection; opening them all
        // in the first instant overflows the broker's accept backlog, and the kernel retries a
        // dropped SYN only after a second, which would be measured as a slow rebalance. Open
        // them now, before the clock starts (idle ones are trimmed later).
        if s.ramp_us == 0 && s.prewarm_pool {
            let want = w.slots.len().min(POOL_PREWARM_MAX);
            for k in 0..want {
                let coord = w.coord_of(k as u32);
                let stream =
                    connect_checked(s.addrs[coord as usize], &s.client_id, s.tls.as_deref())
                        .map_err(|e| {
                            anyhow::anyhow!("connecting to {}: {e}", s.addrs[coord as usize])
                        })?;
                let id = w.add_conn(stream, coord, true)?;
                w.conns[id].as_mut().expect("just added").idle_since_us = 0;
                w.pool_free[coord as usize].push_back(id);
            }
        }
        Ok(w)
    }

    fn add_conn(&mut self, mut stream: TcpStream, addr: u16, pooled: bool) -> io::Result<usize> {
        let id = self.free_conn_ids.pop().unwrap_or_else(|| {
            self.conns.push(None);
            self.conns.len() - 1
        });
        self.poll.registry().register(
            &mut stream,
            Token(id),
            Interest::READABLE | Interest::WRITABLE,
        )?;
        self.conns[id] = Some(Conn {
            stream: Some(stream),
            addr,
            pooled,
            rbuf: BytesMut::with_capacity(if pooled { 4096 } else { 64 * 1024 }),
            wbuf: BytesMut::with_capacity(if pooled { 1024 } else { 16 * 1024 }),
            inflight: VecDeque::new(),
            backlog: VecDeque::new(),
            next_corr: 1,
            dirty: false,
            retry_at_us: 0,
            idle_since_us: 0,
        });
        if pooled {
            self.pool_open += 1;
            self.pool_peak = self.pool_peak.max(self.pool_open);
        }
        Ok(id)
    }

    fn now_us(&self) -> Micros {
        self.t0.elapsed().as_micros() as Micros
    }

    // ---- member events ----

    /// Run a member callback and queue what it asks for.
    fn member_event(&mut self, i: u32, f: impl FnOnce(&mut M, &Ctx, &mut Vec<Action>)) {
        let mut out = std::mem::take(&mut self.scratch);
        let epoch = {
            let slot = &mut self.slots[i as usize];
            let cx = self.shared.ctx(slot.group);
            f(&mut slot.m, &cx, &mut out);
            slot.m.epoch()
        };
        // Tag with the epoch now: another event for this member may be handled before the
        // queue is drained, and what this one asked for must not pass for the newer epoch's.
        for a in out.drain(..) {
            self.queue.push_back((i, a, None, epoch));
        }
        self.scratch = out;
        self.update_stable(i);
    }

    fn update_stable(&mut self, i: u32) {
        let now = if self.track { self.now_us() } else { 0 };
        let track = self.track;
        let slot = &mut self.slots[i as usize];
        let now_stable = slot.m.is_stable();
        if track {
            let owned = slot.m.owned_partitions().len() as u32;
            if owned != slot.owned_n || now_stable != slot.stable {
                slot.owned_n = owned;
                slot.last_change_us = now;
            }
        }
        if now_stable != slot.stable {
            slot.stable = now_stable;
            if now_stable {
                self.stable += 1;
                if !slot.ever_stable {
                    slot.ever_stable = true;
                    self.ever_stable += 1;
                }
            } else {
                self.stable -= 1;
            }
        }
    }

    /// Apply queued actions until none are left (applying one may queue more).
    fn drain_queue(&mut self, now: Micros) {
        while let Some((i, action, start, epoch)) = self.queue.pop_front() {
            match action {
                Action::Send(req) => self.send(i, req, epoch, start.unwrap_or(now), now),
                Action::Timer { kind, at_us } => {
                    self.timers
                        .push(Reverse((at_us, i, timer_code(kind), epoch)));
                }
                Action::Stable { convergence_us } => self.stats.record_convergence(convergence_us),
                Action::Error { api, code } => {
                    if code < 0 {
                        self.stats.code(api, code);
                    }
                    self.stats.error(api, code);
                }
            }
        }
    }

    // ---- sending ----

    fn send(&mut self, i: u32, req: Request, epoch: u32, start_us: Micros, now: Micros) {
        let Some(api) = Api::from_key(req.api_key()) else {
            return;
        };
        let version = self.shared.versions.v(api);
        self.stats.requests[api.index()] += 1;
        let rebalance = matches!(api, Api::JoinGroup | Api::SyncGroup);
        let conn_id = if rebalance {
            let coord = self.coord_of(i);
            match self.pool_conn(coord) {
                Ok(id) => id,
                Err(_) => return self.lost(i, api, epoch, client_error::DISCONNECTED, now),
            }
        } else {
            self.slots[i as usize].shared_conn as usize
        };
        let max_in_flight = self.max_in_flight;
        let Some(conn) = self.conns[conn_id].as_mut() else {
            return self.lost(i, api, epoch, client_error::DISCONNECTED, now);
        };
        if conn.stream.is_none() {
            return self.lost(i, api, epoch, client_error::DISCONNECTED, now);
        }
        let corr = conn.next_corr;
        conn.next_corr = conn.next_corr.wrapping_add(1).max(1);
        let entry = InFlight {
            corr,
            member: i,
            api,
            version,
            epoch,
            start_us,
            queued_us: now,
        };
        let queue_it = !conn.pooled && conn.inflight.len() >= max_in_flight;
        let res = if queue_it {
            let mut b = BytesMut::with_capacity(128);
            let r = encode_frame(&mut b, api.key(), version, corr, &self.client_id, &req);
            if r.is_ok() {
                conn.backlog.push_back((entry, b.freeze()));
            }
            r
        } else {
            let r = encode_frame(
                &mut conn.wbuf,
                api.key(),
                version,
                corr,
                &self.client_id,
                &req,
            );
            if r.is_ok() {
                conn.inflight.push_back(entry);
                if !conn.dirty {
                    conn.dirty = true;
                    self.dirty.push(conn_id);
                }
            }
            r
        };
        match res {
            Ok(()) => {
                if !rebalance {
                    self.outstanding_shared += 1;
                }
            }
            Err(_) => {
                if rebalance {
                    self.release_pool_conn(conn_id);
                }
                self.lost(i, api, epoch, client_error::ENCODE, now)
            }
        }
    }

    /// Requests in flight or waiting, on every connection.
    fn outstanding(&self) -> usize {
        self.outstanding_shared
            + (self.pool_open - self.pool_free.iter().map(VecDeque::len).sum::<usize>())
    }

    fn coord_of(&self, i: u32) -> u16 {
        let slot = &self.slots[i as usize];
        self.conns[slot.shared_conn as usize]
            .as_ref()
            .map(|c| c.addr)
            .unwrap_or(0)
    }

    fn pool_conn(&mut self, coord: u16) -> io::Result<usize> {
        while let Some(id) = self.pool_free[coord as usize].pop_back() {
            if matches!(&self.conns[id], Some(c) if c.stream.is_some()) {
                return Ok(id);
            }
        }
        let stream = connect(self.addrs[coord as usize], self.tls.as_deref())?;
        self.add_conn(stream, coord, true)
    }

    fn release_pool_conn(&mut self, id: usize) {
        let now = self.now_us();
        if let Some(c) = &mut self.conns[id] {
            if c.pooled && c.stream.is_some() && c.inflight.is_empty() {
                c.idle_since_us = now;
                self.pool_free[c.addr as usize].push_back(id);
            }
        }
    }

    /// Close pool connections idle for a while beyond a small reserve, so a start-up storm
    /// (every member joining at once) does not keep one connection per member open forever.
    fn trim_pool(&mut self, now: Micros) {
        let keep = POOL_IDLE_RESERVE.max(self.slots.len() / 8);
        for addr in 0..self.pool_free.len() {
            // The free list is a stack: the front holds the longest-idle connections.
            while self.pool_free[addr].len() > keep {
                let id = self.pool_free[addr][0];
                let idle = match &self.conns[id] {
                    Some(c) => now.saturating_sub(c.idle_since_us) > POOL_IDLE_US,
                    None => true,
                };
                if !idle {
                    break;
                }
                self.pool_free[addr].pop_front();
                if let Some(mut c) = self.conns[id].take() {
                    if let Some(mut st) = c.stream.take() {
                        let _ = self.poll.registry().deregister(&mut st);
                    }
                    self.free_conn_ids.push(id);
                    self.pool_open -= 1;
                }
            }
        }
    }

    /// A request will get no answer: count it and tell the member (if it still cares).
    fn lost(&mut self, i: u32, api: Api, epoch: u32, code: i16, now: Micros) {
        self.stats.code(api, code);
        self.stats.error(api, code);
        if self.slots[i as usize].m.epoch() == epoch {
            self.member_event(i, |m, cx, out| m.on_lost(cx, api, now, out));
        }
    }

    fn flush(&mut self, id: usize) {
        let Some(conn) = self.conns[id].as_mut() else {
            return;
        };
        conn.dirty = false;
        let Some(stream) = conn.stream.as_mut() else {
            conn.wbuf.clear();
            return;
        };
        let mut broken = false;
        while !conn.wbuf.is_empty() {
            match stream.write(&conn.wbuf) {
                Ok(0) => {
                    broken = true;
                    break;
                }
                Ok(n) => conn.wbuf.advance(n),
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(_) => {
                    broken = true;
                    break;
                }
            }
        }
        // TLS records the socket did not take yet (never for plaintext).
        if !broken && conn.wbuf.is_empty() && stream.pending_output() {
            match stream.flush() {
                Err(e) if e.kind() != io::ErrorKind::WouldBlock => broken = true,
                _ => {}
            }
        }
        if broken {
            let now = self.now_us();
            self.fail_conn(id, client_error::DISCONNECTED, now);
        }
    }

    fn flush_dirty(&mut self) {
        while let Some(id) = self.dirty.pop() {
            self.flush(id);
        }
    }

    /// Close a connection: every request on it is lost. Shared connections are reopened (now or
    /// on a later attempt); pool connections are dropped.
    fn fail_conn(&mut self, id: usize, code: i16, now: Micros) {
        let Some(conn) = self.conns[id].as_mut() else {
            return;
        };
        if let Some(mut s) = conn.stream.take() {
            let _ = self.poll.registry().deregister(&mut s);
        }
        let mut lost: Vec<InFlight> = conn.inflight.drain(..).collect();
        lost.extend(conn.backlog.drain(..).map(|(e, _)| e));
        conn.rbuf.clear();
        conn.wbuf.clear();
        let pooled = conn.pooled;
        let addr = conn.addr;
        if pooled {
            self.conns[id] = None;
            self.free_conn_ids.push(id);
            self.pool_open -= 1;
            // It may be waiting in the free list; its id is about to be reused.
            self.pool_free[addr as usize].retain(|&x| x != id);
        } else {
            self.outstanding_shared -= lost.len();
            match connect(self.addrs[addr as usize], self.tls.as_deref()) {
                Ok(mut s) => {
                    let registered = self.poll.registry().register(
                        &mut s,
                        Token(id),
                        Interest::READABLE | Interest::WRITABLE,
                    );
                    if let (Ok(()), Some(c)) = (registered, self.conns[id].as_mut()) {
                        c.stream = Some(s);
                    }
                }
                Err(_) => {
                    if let Some(c) = self.conns[id].as_mut() {
                        c.retry_at_us = now + 500_000;
                    }
                }
            }
        }
        for e in lost {
            self.lost(e.member, e.api, e.epoch, code, now);
        }
    }

    fn retry_down_conns(&mut self, now: Micros) {
        for k in 0..self.shared_ids.len() {
            let id = self.shared_ids[k];
            let (addr, due) = match &self.conns[id] {
                Some(c) if c.stream.is_none() && c.retry_at_us <= now => (c.addr, true),
                _ => (0, false),
            };
            if !due {
                continue;
            }
            match connect(self.addrs[addr as usize], self.tls.as_deref()) {
                Ok(mut s) => {
                    if self
                        .poll
                        .registry()
                        .register(&mut s, Token(id), Interest::READABLE | Interest::WRITABLE)
                        .is_ok()
                    {
                        if let Some(c) = self.conns[id].as_mut() {
                            c.stream = Some(s);
                        }
                    }
                }
                Err(_) => {
                    if let Some(c) = self.conns[id].as_mut() {
                        c.retry_at_us = now + 500_000;
                    }
                }
            }
        }
    }

    fn check_timeouts(&mut self, now: Micros) {
        for id in 0..self.conns.len() {
            let expired = match &self.conns[id] {
                Some(c) => c.inflight.front().is_some_and(|f| {
                    let limit = if matches!(f.api, Api::JoinGroup | Api::SyncGroup) {
                        self.rebalance_request_timeout_us
                    } else {
                        self.request_timeout_us
                    };
                    now.saturating_sub(f.queued_us) > limit
                }),
                None => false,
            };
            if expired {
                self.fail_conn(id, client_error::TIMEOUT, now);
            }
        }
    }

    // ---- receiving ----

    fn on_readable(&mut self, id: usize) {
        let mut closed = false;
        {
            let Some(conn) = self.conns[id].as_mut() else {
                return;
            };
            let Some(stream) = conn.stream.as_mut() else {
                return;
            };
            loop {
                match stream.read(&mut self.read_buf) {
                    Ok(0) => {
                        closed = true;
                        break;
                    }
                    Ok(n) => {
                        conn.rbuf.extend_from_slice(&self.read_buf[..n]);
                        // A short read emptied the socket; new data raises a new edge, so
                        // skip the read that would only say WouldBlock.
                        if n < self.read_buf.len() {
                            break;
                        }
                    }
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                    Err(_) => {
                        closed = true;
                        break;
                    }
                }
            }
        }
        let now = self.now_us();
        self.process_frames(id, now);
        if closed {
            self.fail_conn(id, client_error::DISCONNECTED, now);
        }
    }

    fn process_frames(&mut self, id: usize, now: Micros) {
        loop {
            let frame = {
                let Some(conn) = self.conns[id].as_mut() else {
                    return;
                };
                match split_frame(&mut conn.rbuf) {
                    Ok(Some(f)) => f,
                    Ok(None) => return,
                    Err(_) => {
                        return self.fail_conn(id, client_error::BAD_RESPONSE, now);
                    }
                }
            };
            if frame.len() < 4 {
                return self.fail_conn(id, client_error::BAD_RESPONSE, now);
            }
            let corr = i32::from_be_bytes([frame[0], frame[1], frame[2], frame[3]]);
            let (entry, pooled) = {
                let Some(conn) = self.conns[id].as_mut() else {
                    return;
                };
                let pos = if conn.inflight.front().map(|f| f.corr) == Some(corr) {
                    Some(0)
                } else {
                    conn.inflight.iter().position(|f| f.corr == corr)
                };
                let Some(pos) = pos else {
                    return self.fail_conn(id, client_error::BAD_RESPONSE, now);
                };
                let entry = conn.inflight.remove(pos).expect("position is in range");
                // Refill the window from the backlog.
                while conn.inflight.len() < self.max_in_flight {
                    let Some((e, bytes)) = conn.backlog.pop_front() else {
                        break;
                    };
                    conn.wbuf.extend_from_slice(&bytes);
                    conn.inflight.push_back(e);
                    if !conn.dirty {
                        conn.dirty = true;
                        self.dirty.push(id);
                    }
                }
                (entry, conn.pooled)
            };
            if pooled {
                self.release_pool_conn(id);
            } else {
                self.outstanding_shared -= 1;
            }
            self.on_response(entry, &frame, now);
        }
    }

    fn on_response(&mut self, e: InFlight, frame: &Bytes, now: Micros) {
        let api = e.api;
        self.stats.responses[api.index()] += 1;
        self.stats
            .record_latency(api, now.saturating_sub(e.start_us));
        let resp = match wire::codec::decode_response(api.key(), e.version, frame) {
            Ok((_, r)) => r,
            Err(_) => return self.lost(e.member, api, e.epoch, client_error::BAD_RESPONSE, now),
        };
        self.stats.code(api, response_code(&resp));
        if self.slots[e.member as usize].m.epoch() != e.epoch {
            self.stats.stale[api.index()] += 1;
            return;
        }
        self.member_event(e.member, |m, cx, out| m.on_response(cx, resp, now, out));
    }

    // ---- the loop ----

    fn report(
        &mut self,
        draining: bool,
        stable_at_end: Option<u32>,
        finished: bool,
        tx: &Sender<IntervalReport>,
    ) {
        let shared_conns = self
            .shared_ids
            .iter()
            .filter(|&&id| matches!(&self.conns[id], Some(c) if c.stream.is_some()))
            .count() as u32;
        let owned_at_end = if stable_at_end.is_some() {
            self.slots
                .iter()
                .flat_map(|s| s.m.owned_partitions().iter().map(|&(t, p)| (s.group, t, p)))
                .collect()
        } else {
            Vec::new()
        };
        let member_times = if stable_at_end.is_some() && self.track {
            self.slots
                .iter()
                .map(|s| MemberTimes {
                    group: s.group,
                    started_us: s.started_us,
                    stable: s.stable,
                    owned: s.owned_n,
                    last_change_us: s.last_change_us,
                })
                .collect()
        } else {
            Vec::new()
        };
        let _ = tx.send(IntervalReport {
            worker: self.idx,
            stats: self.stats.take(),
            stable: self.stable,
            members: self.slots.len() as u32,
            ever_stable: self.ever_stable,
            shared_conns,
            pool_conns: self.pool_open as u32,
            pool_peak: self.pool_peak as u32,
            rate_late_slots: std::mem::take(&mut self.rate_late),
            rate_idle_slots: std::mem::take(&mut self.rate_idle),
            draining,
            stable_at_end,
            owned_at_end,
            finished,
            fatal: None,
            member_times,
        });
    }

    /// Every group's aggregates over this worker's started members, and its late joiners.
    fn group_report(&self, now: Micros) -> GroupReport {
        let mut groups = vec![GroupAgg::default(); self.shared.groups.len()];
        let mut late = Vec::new();
        for s in &self.slots {
            if let Some(index) = s.late {
                late.push(LateView {
                    index,
                    started_us: s.started_us,
                    stable: s.stable,
                    last_change_us: s.last_change_us,
                });
            }
            if s.started_us.is_some() {
                groups[s.group as usize].add(s.stable, s.owned_n, s.last_change_us);
            }
        }
        GroupReport {
            worker: self.idx,
            at_us: now,
            groups,
            late,
        }
    }

    /// Start a member now (start-up timer or release of a late joiner).
    fn start_member(&mut self, i: u32, now: Micros) {
        let slot = &mut self.slots[i as usize];
        slot.started_us.get_or_insert(now);
        slot.last_change_us = now;
        self.member_event(i, |m, cx, out| m.start(cx, now, out));
    }

    fn run_loop(&mut self, s: &WorkerSetup) {
        let tx = s.reports.clone();
        let mut events = Events::with_capacity(256);
        // Start-up: spread member starts over the ramp. Late joiners wait for their release.
        let mut late: Vec<(u32, u32)> = Vec::new();
        for i in 0..self.slots.len() {
            if let Some(k) = self.slots[i].late {
                late.push((k, i as u32));
                continue;
            }
            let g = self.slots[i].global as u64;
            let at = if s.total_members > 1 {
                s.ramp_us * g / s.total_members as u64
            } else {
                0
            };
            self.timers.push(Reverse((at, i as u32, T_START, 0)));
        }
        let churn_interval_us = if s.churn_per_s > 0.0 {
            Some((1e6 / s.churn_per_s).max(1.0) as Micros)
        } else {
            None
        };
        let mut next_churn = churn_interval_us.unwrap_or(u64::MAX);
        let rate_interval_ns = s.rate_per_s.map(|r| 1e9 / r);
        let mut next_slot_ns = 0f64;
        let mut rate_cursor = 0usize;
        let mut next_report = 1_000_000u64;
        let mut next_maintenance = 100_000u64;
        let mut shutting_down = false;
        let mut drain_deadline = u64::MAX;
        let shared_cap = self.max_in_flight * self.shared_ids.len().max(1);
        let mut last_activity = 0u64;
        let mut next_done_check = 0u64;
        late.sort_unstable();
        self.dormant = late.into_iter().map(|(_, i)| i).collect();
        let mut next_group_report = if s.group_reports.is_some() {
            0
        } else {
            u64::MAX
        };

        loop {
            let now = self.now_us();

            if !shutting_down && !self.dormant.is_empty() {
                let released = s.control.released.load(Ordering::Acquire);
                while let Some(&i) = self.dormant.front() {
                    if self.slots[i as usize].late.is_some_and(|k| k < released) {
                        self.dormant.pop_front();
                        self.start_member(i, now);
                        self.drain_queue(now);
                    } else {
                        break;
                    }
                }
            }
            if let (Some(tx), false) = (&s.group_reports, shutting_down) {
                if now >= next_group_report {
                    next_group_report = now + REPORT_EVERY_US;
                    let _ = tx.send(self.group_report(now));
                }
            }

            let stop = s.control.stop.load(Ordering::Acquire);
            if !shutting_down && (now >= s.duration_us || stop) {
                // The measured run is over: report it, then leave and drain.
                let stable = self.stable;
                self.report(false, Some(stable), false, &tx);
                next_report = now + 1_000_000;
                shutting_down = true;
                drain_deadline = now + s.drain_us;
                self.timers.clear();
                for i in 0..self.slots.len() as u32 {
                    let leave = s.leave_on_exit;
                    self.member_event(i, |m, cx, out| m.shutdown(cx, leave, now, out));
                }
                self.drain_queue(now);
            }
            if shutting_down && (now >= drain_deadline || now >= next_done_check) {
                next_done_check = now + 10_000;
                if now >= drain_deadline || self.slots.iter().all(|sl| sl.m.is_done()) {
                    break;
                }
            }

            // Timers.
            while let Some(&Reverse((at, i, code, epoch))) = self.timers.peek() {
                if at > now {
                    break;
                }
                self.timers.pop();
                if code == T_START {
                    if !shutting_down {
                        self.start_member(i, now);
                    }
                } else if self.slots[i as usize].m.epoch() == epoch {
                    let kind = match code {
                        T_HEARTBEAT => TimerKind::Heartbeat,
                        T_COMMIT => TimerKind::Commit,
                        _ => TimerKind::Retry,
                    };
                    self.member_event(i, |m, cx, out| m.on_timer(cx, kind, now, out));
                }
                self.drain_queue(now);
            }

            // Churn: a random stable member leaves and comes back as a new member.
            if let Some(iv) = churn_interval_us {
                while !shutting_down && now >= next_churn {
                    next_churn += iv;
                    if self.slots.is_empty() {
                        break;
                    }
                    for _ in 0..16 {
                        let i = fastrand::u32(..self.slots.len() as u32);
                        if self.slots[i as usize].m.is_stable() {
                            let mut done = false;
                            self.member_event(i, |m, cx, out| done = m.churn(cx, now, out));
                            self.drain_queue(now);
                            if done {
                                break;
                            }
                        }
                    }
                }
            }

            // Open loop: one heartbeat per slot of the fixed rate, latency from the slot time.
            if let (Some(iv), false) = (rate_interval_ns, shutting_down) {
                let due_ns = (now as f64) * 1000.0;
                if self.stable == 0 && next_slot_ns <= due_ns {
                    // Nobody to send for (start-up, or everyone rebalancing): skip the due slots.
                    let due = ((due_ns - next_slot_ns) / iv).floor() + 1.0;
                    self.rate_idle += due as u64;
                    next_slot_ns += due * iv;
                }
                let mut sent_this_pass = 0;
                while next_slot_ns <= (now as f64) * 1000.0
                    && self.outstanding_shared < shared_cap
                    && sent_this_pass < 4096
                {
                    let intended = (next_slot_ns / 1000.0) as Micros;
                    next_slot_ns += iv;
                    if now.saturating_sub(intended) > 1000 {
                        self.rate_late += 1;
                    }
                    let n = self.slots.len();
                    let mut found = None;
                    for k in 0..n {
                        let i = (rate_cursor + k) % n;
                        if self.slots[i].m.is_stable() {
                            found = Some(i);
                            rate_cursor = i + 1;
                            break;
                        }
                    }
                    let Some(i) = found else {
                        self.rate_idle += 1;
                        continue;
                    };
                    let mut out = std::mem::take(&mut self.scratch);
                    let epoch = {
                        let slot = &mut self.slots[i];
                        let cx = self.shared.ctx(slot.group);
                        slot.m.open_loop_heartbeat(&cx, now, &mut out);
                        slot.m.epoch()
                    };
                    for a in out.drain(..) {
                        let start = matches!(a, Action::Send(_)).then_some(intended);
                        self.queue.push_back((i as u32, a, start, epoch));
                    }
                    self.scratch = out;
                    self.drain_queue(now);
                    sent_this_pass += 1;
                }
            }

            self.flush_dirty();

            if now >= next_maintenance {
                next_maintenance = now + 100_000;
                self.check_timeouts(now);
                self.retry_down_conns(now);
                self.trim_pool(now);
                self.drain_queue(now);
                self.flush_dirty();
            }
            if now >= next_report {
                next_report += 1_000_000;
                self.report(shutting_down, None, false, &tx);
            }

            // Sleep until the next deadline (or spin when an open-loop slot is close).
            let mut next = next_report.min(next_maintenance);
            if let Some(&Reverse((at, ..))) = self.timers.peek() {
                next = next.min(at);
            }
            if !shutting_down {
                next = next
                    .min(s.duration_us)
                    .min(next_churn)
                    .min(next_group_report);
            } else {
                next = next.min(drain_deadline);
            }
            let now = self.now_us();
            let mut timeout = Duration::from_micros(next.saturating_sub(now));
            if let (Some(_), false) = (rate_interval_ns, shutting_down) {
                let slot_us = (next_slot_ns / 1000.0) as Micros;
                if self.outstanding_shared < shared_cap {
                    if slot_us <= now + 2000 {
                        timeout = Duration::ZERO;
                    } else {
                        timeout = timeout.min(Duration::from_micros(slot_us - now - 1000));
                    }
                }
            }
            // Spin before parking: a burst of requests comes back as a burst of responses, and a
            // thread that sleeps between them pays a cross-core wake-up (~55 µs here) for each,
            // which would be measured as broker latency.
            if self.outstanding() > 0 && now.saturating_sub(last_activity) < s.spin_us {
                timeout = Duration::ZERO;
            }
            if !timeout.is_zero() {
                // Wake at the deadline itself; epoll's own timeout (whole ms) is only a fallback.
                let at = now + timeout.as_micros() as u64;
                if self.timer.arm(at).is_ok() {
                    timeout += Duration::from_millis(2);
                }
            }
            let poll_res = self.poll.poll(&mut events, Some(timeout));
            if let Err(e) = poll_res {
                if e.kind() != io::ErrorKind::Interrupted {
                    let mut r = self.stats.take();
                    r.error(Api::Heartbeat, client_error::DISCONNECTED);
                    let _ = tx.send(IntervalReport {
                        worker: self.idx,
                        stats: r,
                        stable: self.stable,
                        members: self.slots.len() as u32,
                        ever_stable: self.ever_stable,
                        shared_conns: 0,
                        pool_conns: 0,
                        pool_peak: self.pool_peak as u32,
                        rate_late_slots: 0,
                        rate_idle_slots: 0,
                        draining: true,
                        stable_at_end: None,
                        owned_at_end: Vec::new(),
                        finished: true,
                        fatal: Some(format!("worker {}: poll failed: {e}", self.idx)),
                        member_times: Vec::new(),
                    });
                    return;
                }
            }
            let now = self.now_us();
            if !events.is_empty() {
                last_activity = now;
            }
            for ev in events.iter() {
                if ev.token() == TIMER_TOKEN {
                    self.timer.acknowledge();
                    continue;
                }
                let id = ev.token().0;
                if ev.is_readable() || ev.is_read_closed() || ev.is_error() {
                    self.on_readable(id);
                }
                if ev.is_writable() {
                    let has_bytes = matches!(&self.conns.get(id), Some(Some(c)) if !c.wbuf.is_empty()
                            || c.stream.as_ref().is_some_and(TcpStream::pending_output));
                    if has_bytes {
                        self.flush(id);
                    }
                }
            }
            self.drain_queue(now);
        }

        // Whatever is still in flight will not be answered in time; it is not an error.
        debug_assert_eq!(
            self.stable as usize,
            self.slots.iter().filter(|s| s.m.is_stable()).count()
        );
        self.report(true, None, true, &tx);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kafka_protocol::messages::leave_group_response::MemberResponse;
    use kafka_protocol::messages::offset_commit_response::{
        OffsetCommitResponsePartition, OffsetCommitResponseTopic,
    };
    use kafka_protocol::messages::offset_fetch_response::OffsetFetchResponseGroup;
    use kafka_protocol::messages::*;
    use kafka_protocol::ResponseError;

    #[test]
    fn response_code_finds_nested_errors() {
        let rebalance = ResponseError::RebalanceInProgress.code();
        assert_eq!(
            response_code(&Response::Heartbeat(
                HeartbeatResponse::default().with_error_code(rebalance)
            )),
            rebalance
        );
        let commit =
            OffsetCommitResponse::default().with_topics(vec![OffsetCommitResponseTopic::default()
                .with_partitions(vec![
                    OffsetCommitResponsePartition::default(),
                    OffsetCommitResponsePartition::default()
                        .with_error_code(ResponseError::IllegalGeneration.code()),
                ])]);
        assert_eq!(
            response_code(&Response::OffsetCommit(commit)),
            ResponseError::IllegalGeneration.code()
        );
        let leave =
            LeaveGroupResponse::default()
                .with_members(vec![MemberResponse::default()
                    .with_error_code(ResponseError::UnknownMemberId.code())]);
        assert_eq!(
            response_code(&Response::LeaveGroup(leave)),
            ResponseError::UnknownMemberId.code()
        );
        let fetch = OffsetFetchResponse::default()
            .with_groups(vec![OffsetFetchResponseGroup::default()
                .with_error_code(ResponseError::NotCoordinator.code())]);
        assert_eq!(
            response_code(&Response::OffsetFetch(fetch)),
            ResponseError::NotCoordinator.code()
        );
        assert_eq!(
            response_code(&Response::SyncGroup(SyncGroupResponse::default())),
            0
        );
    }
}
