//! The event loop: fake time, one queue of timed events, the network between clients and the
//! broker, and the per-seed parameters.

use super::broker::Slot;
use super::clients::{Client, Proto};
use super::oracle::Oracle;
use super::rng::Rng;
use super::{SimConfig, SimFailure, SimStats};
use engine::group::{GroupConfig, GroupRequest, GroupResponse, ReqId};
use engine::topics::{TopicRegistry, TopicsSnapshot};
use std::cmp::Reverse;
use std::collections::{BTreeMap, BTreeSet, BinaryHeap, VecDeque};
use std::sync::{Arc, OnceLock};
use storage::log::LogConfig;

/// Simulated wall clock at the start (Kafka stores commit timestamps as epoch milliseconds).
pub(super) const T0: i64 = 1_700_000_000_000;
/// Fault-free time at the end of every run, long enough for sessions, rebalance timeouts and
/// revocation timeouts to run out several times.
const SETTLE_MS: i64 = 180_000;
/// How many recent events a failure report shows.
const RECENT: usize = 60;

/// Topics every seed can use: (name, partitions). Ids are fixed so assignments (which order
/// topics by id) replay exactly.
const TOPICS: &[(&str, i32)] = &[
    ("orders", 6),
    ("payments", 3),
    ("clicks", 12),
    ("audit", 1),
    ("users", 4),
    ("events", 8),
];

/// The topics, loaded once per process through the real registry from a `topics.json` written
/// with fixed ids (the registry itself hands out random ids).
pub(super) fn topics() -> Arc<TopicsSnapshot> {
    static TOPICS_SNAPSHOT: OnceLock<Arc<TopicsSnapshot>> = OnceLock::new();
    TOPICS_SNAPSHOT
        .get_or_init(|| {
            let dir = std::env::temp_dir().join(format!("rl-sim-topics-{}", std::process::id()));
            std::fs::create_dir_all(&dir).expect("temp dir for the simulator's topics");
            let mut topics = vec![serde_json::json!({
                "name": engine::topics::CONSUMER_OFFSETS,
                "id": uuid::Uuid::from_u128(0x5157_0000_0000_4000_8000_0000_0000_0001),
                "partitions": 50,
                "internal": true,
            })];
            for (i, (name, n)) in TOPICS.iter().enumerate() {
                topics.push(serde_json::json!({
                    "name": name,
                    "id": uuid::Uuid::from_u128(0x5157_0000_0000_4000_8000_0000_0001_0000 + i as u128),
                    "partitions": n,
                }));
            }
            let body = serde_json::json!({"version": 1, "topics": topics});
            std::fs::write(dir.join("topics.json"), body.to_string())
                .expect("write the simulator's topics.json");
            let reg = TopicRegistry::open(&dir, 50).expect("load the simulator's topics");
            let snap = reg.snapshot();
            let _ = std::fs::remove_dir_all(&dir);
            snap
        })
        .clone()
}

pub(super) fn topic_names() -> Vec<String> {
    TOPICS.iter().map(|(n, _)| n.to_string()).collect()
}

/// What a client gets back: the coordinator's answer, or the error the broker's edge gives when
/// the partition could not answer (loading, unavailable).
#[derive(Debug, Clone)]
pub(super) enum Reply {
    Resp(GroupResponse),
    Err(i16),
}

/// A request on the wire.
#[derive(Debug, Clone)]
pub(super) struct ReqMsg {
    pub client: usize,
    pub corr: u64,
    pub group: usize,
    pub version: i16,
    pub req: GroupRequest,
    /// The broker process the request was sent to; a crash resets its connections.
    pub incarnation: u64,
}

#[derive(Debug)]
pub(super) enum Ev {
    ToBroker(Box<ReqMsg>),
    ToClient {
        client: usize,
        corr: u64,
        reply: Box<Reply>,
        /// Which load of the partition answered (classic generations restart with a reload).
        load: u64,
    },
    ClientWake(usize),
    WriterStart {
        p: usize,
        inc: u64,
    },
    WriterDone {
        p: usize,
        inc: u64,
    },
    Tick {
        p: usize,
        inc: u64,
    },
    ReloadRetry {
        p: usize,
        inc: u64,
    },
    DiskFault(usize),
    DiskHeal {
        p: usize,
        inc: u64,
    },
    JournalStart {
        inc: u64,
    },
    JournalDone {
        inc: u64,
    },
    CheckpointDone {
        inc: u64,
    },
    JournalFault,
    JournalHeal {
        inc: u64,
    },
    Crash,
    Restart,
    /// An offloaded target assignment of partition `p` has run.
    Assigned {
        p: usize,
        inc: u64,
        pending: Box<engine::partition_core::PendingAssignment>,
    },
    /// Transactions (`txn.rs`): a transactional client's request and answer, its timer, the
    /// `__transaction_state` writer and ticker, a marker (re)sent to slot `s`, and a verified
    /// TxnOffsetCommit reaching its group's partition.
    TxnToBroker(Box<super::txn::TxnMsg>),
    TxnToClient {
        client: usize,
        corr: u64,
        reply: Box<super::txn::TxnReply>,
    },
    TxnWake(usize),
    TxnWriterDone {
        inc: u64,
    },
    TxnTick {
        inc: u64,
    },
    MarkerSend {
        job: u64,
        s: usize,
        inc: u64,
        load: u64,
    },
    TxnVerified {
        msg: Box<super::txn::TxnMsg>,
        group: usize,
        tag: Option<super::txn::TxnKey>,
        inc: u64,
    },
}

struct Queued {
    at: i64,
    seq: u64,
    ev: Ev,
}

impl PartialEq for Queued {
    fn eq(&self, o: &Self) -> bool {
        (self.at, self.seq) == (o.at, o.seq)
    }
}
impl Eq for Queued {}
impl PartialOrd for Queued {
    fn partial_cmp(&self, o: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(o))
    }
}
impl Ord for Queued {
    fn cmp(&self, o: &Self) -> std::cmp::Ordering {
        (self.at, self.seq).cmp(&(o.at, o.seq))
    }
}

/// Per-seed parameters: how hostile this run is.
#[derive(Debug, Clone)]
pub(super) struct Params {
    pub drop_p: f64,
    pub dup_p: f64,
    pub slow_p: f64,
    pub slow_max_ms: i64,
    pub latency_max_ms: i64,
    /// Mean time between broker crashes (None: no crashes this seed).
    pub crash_mean_ms: Option<f64>,
    pub down_max_ms: i64,
    /// Mean time between disk faults per partition (None: none).
    pub disk_fault_mean_ms: Option<f64>,
    pub heal_max_ms: i64,
    pub fsync_max_ms: i64,
    /// Per client decision point: crash, leave, get cut off, change subscription.
    pub client_crash_p: f64,
    pub leave_p: f64,
    pub cutoff_p: f64,
    pub sub_change_p: f64,
    /// How long an offloaded target assignment takes to come back (`gcfg` says which are
    /// offloaded: all, or only large ones, which the simulated groups never are).
    pub assign_max_ms: i64,
    pub gcfg: GroupConfig,
    pub log_cfg: LogConfig,
    pub compaction_slice_bytes: usize,
    pub snapshot_slice_records: usize,
    /// The journal rotates (and checkpoints) past this many bytes.
    pub journal_checkpoint_bytes: u64,
    /// Each partition's bound on bytes queued and not yet durable: 1 makes every request that
    /// finds anything queued wait, a few hundred bytes every few records.
    pub max_queued_bytes: usize,
}

impl Params {
    fn draw(rng: &mut Rng) -> Self {
        let calm = rng.chance(0.1);
        let f = |rng: &mut Rng, xs: &[f64]| *rng.pick(xs);
        let gcfg = GroupConfig {
            initial_rebalance_delay_ms: *rng.pick(&[0, 300, 3000]),
            // Offsets never expire and empty groups are never deleted during a run, so epochs
            // and commits can be checked against their whole history (see oracle.rs).
            offsets_retention_check_interval_ms: 1 << 50,
            snapshot_interval_records: *rng.pick(&[40, 300, 2000, 100_000]),
            delete_retention_ms: *rng.pick(&[0, 1000, 60_000, 86_400_000]),
            consumer_session_timeout_ms: *rng.pick(&[10_000, 20_000]),
            consumer_heartbeat_interval_ms: *rng.pick(&[500, 1000, 2000]),
            consumer_assignment_interval_ms: *rng.pick(&[0, 100, 1000]),
            // Ringleader's short interval for reconciling members: off (Kafka's behaviour), or
            // shorter than the network's delays, or in between.
            consumer_reconciliation_heartbeat_interval_ms: *rng.pick(&[0, 20, 100, 400]),
            ..GroupConfig::default()
        };
        let mut gcfg = gcfg;
        // Off the request path for every group in half the seeds, coming back after up to 0,
        // 20 or 400 ms: the group moves on meanwhile (joins, leaves, resubscriptions, crashes).
        let offload_all = rng.chance(0.5);
        if offload_all {
            gcfg.assignment_offload_min_work = 0;
        }
        let assign_max_ms = *rng.pick(&[0, 20, 400]);
        let log_cfg = LogConfig {
            segment_bytes: *rng.pick(&[700, 4096, 65_536, 100 << 20]),
            max_batch_bytes: 64 << 20,
            read_chunk_bytes: *rng.pick(&[97, 4096, 1 << 20]),
        };
        Self {
            drop_p: if calm {
                0.0
            } else {
                f(rng, &[0.0, 0.005, 0.02, 0.06])
            },
            dup_p: if calm {
                0.0
            } else {
                f(rng, &[0.0, 0.01, 0.04])
            },
            slow_p: if calm {
                0.0
            } else {
                f(rng, &[0.0, 0.01, 0.05])
            },
            slow_max_ms: *rng.pick(&[200, 2000, 8000]),
            latency_max_ms: *rng.pick(&[1, 3, 10]),
            crash_mean_ms: if calm {
                None
            } else {
                *rng.pick(&[None, Some(20_000.0), Some(60_000.0), Some(150_000.0)])
            },
            down_max_ms: *rng.pick(&[10, 1000, 5000]),
            disk_fault_mean_ms: if calm {
                None
            } else {
                *rng.pick(&[None, Some(15_000.0), Some(60_000.0)])
            },
            heal_max_ms: *rng.pick(&[100, 3000]),
            journal_checkpoint_bytes: *rng.pick(&[2048, 16_384, 262_144, 64 << 20]),
            fsync_max_ms: *rng.pick(&[1, 5, 30]),
            client_crash_p: if calm {
                0.0
            } else {
                f(rng, &[0.0, 0.002, 0.01])
            },
            leave_p: f(rng, &[0.0, 0.003, 0.01]),
            cutoff_p: if calm {
                0.0
            } else {
                f(rng, &[0.0, 0.002, 0.006])
            },
            sub_change_p: f(rng, &[0.0, 0.002, 0.01]),
            assign_max_ms,
            gcfg,
            log_cfg,
            compaction_slice_bytes: *rng.pick(&[100, 4096, 1 << 20]),
            snapshot_slice_records: *rng.pick(&[1, 7, 100_000]),
            max_queued_bytes: *rng.pick(&[1, 600, 4096, engine::partition_core::MAX_QUEUED_BYTES]),
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Protocol {
    Classic,
    Consumer,
}

/// One group of the run.
#[derive(Debug, Clone)]
pub(super) struct GroupSpec {
    pub name: String,
    pub protocol: Protocol,
    /// Topics members may subscribe to (each member takes a subset; most take all).
    pub topics: Vec<String>,
    /// The `__consumer_offsets` partition (Kafka's hash).
    pub partition: usize,
    pub clients: Vec<usize>,
    /// Consumer groups: the server assignor members ask for (None: the broker's default).
    pub assignor: Option<String>,
    /// Members switch protocol when they restart (a rolling upgrade or downgrade): the group
    /// migrates online between classic and consumer. `protocol` is the one it starts with.
    pub mixed: bool,
}

pub(super) struct World {
    pub seed: u64,
    pub cfg: SimConfig,
    pub p: Params,
    pub rng: Rng,
    pub now: i64,
    pub step: u64,
    queue: BinaryHeap<Reverse<Queued>>,
    qseq: u64,
    pub topics: Arc<TopicsSnapshot>,
    pub groups: Vec<GroupSpec>,
    pub clients: Vec<Client>,
    pub slots: Vec<Slot>,
    /// The broker process: up or down, and which incarnation (connections die with it).
    pub broker_up: bool,
    pub incarnation: u64,
    /// Requests the coordinator is answering: request id → who and what.
    pub routes: BTreeMap<ReqId, super::broker::Route>,
    pub next_req: ReqId,
    pub next_corr: u64,
    /// Committed offsets are globally unique, so a fetched value names the commit it came from.
    pub next_offset: i64,
    pub oracle: Oracle,
    pub stats: SimStats,
    pub failure: Option<String>,
    /// Faults stop and the network heals: the run must converge.
    pub settling: bool,
    /// Groups whose invariants this step must re-check.
    pub touched: BTreeSet<usize>,
    recent: VecDeque<String>,
    /// The shard's journal: the one durable point of every partition.
    pub journal: super::journal::SimJournal,
    /// The `__transaction_state` partition and the transactional clients.
    pub txn: super::txn::TxnHost,
    pub tclients: Vec<super::txn::TxnClient>,
    /// Producer ids are never reused (the broker allocates them in blocks).
    pub next_pid: i64,
}

impl World {
    pub fn new(seed: u64, cfg: SimConfig) -> Self {
        let mut rng = Rng::new(seed);
        let p = Params::draw(&mut rng);
        let topics = topics();
        let names = topic_names();
        let n_groups = cfg.groups.max(1);
        let mut groups = Vec::with_capacity(n_groups);
        for g in 0..n_groups {
            let protocol = if rng.chance(0.5) {
                Protocol::Classic
            } else {
                Protocol::Consumer
            };
            let mut pool: Vec<String> = names.clone();
            let k = 1 + rng.below(3) as usize;
            let mut chosen = Vec::new();
            for _ in 0..k {
                let i = rng.below(pool.len() as u64) as usize;
                chosen.push(pool.remove(i));
            }
            chosen.sort();
            let mixed = rng.chance(0.3);
            let name = format!("group-{g}");
            let partition = wire::partition_for(&name, cfg.partitions.max(1)) as usize;
            let assignor = match protocol {
                Protocol::Consumer => rng
                    .pick(&[None, Some("uniform".to_string()), Some("range".to_string())])
                    .clone(),
                Protocol::Classic => None,
            };
            groups.push(GroupSpec {
                name,
                protocol,
                topics: chosen,
                partition,
                clients: Vec::new(),
                assignor,
                mixed,
            });
        }
        let mut w = World {
            seed,
            cfg: cfg.clone(),
            p,
            rng,
            now: T0,
            step: 0,
            queue: BinaryHeap::new(),
            qseq: 0,
            topics,
            groups,
            clients: Vec::new(),
            slots: Vec::new(),
            broker_up: true,
            incarnation: 1,
            routes: BTreeMap::new(),
            next_req: 1,
            next_corr: 1,
            next_offset: 1000,
            oracle: Oracle::default(),
            stats: SimStats {
                seeds: 1,
                ..Default::default()
            },
            failure: None,
            settling: false,
            touched: BTreeSet::new(),
            recent: VecDeque::new(),
            journal: Default::default(),
            txn: Default::default(),
            tclients: Vec::new(),
            next_pid: 5000,
        };
        w.journal.checkpoint_bytes = w.p.journal_checkpoint_bytes;
        w.journal_recover_and_start();
        for p in 0..cfg.partitions.max(1) {
            w.slots.push(Slot::new(p));
        }
        for s in 0..w.slots.len() {
            w.load_at_start(s);
        }
        w.txn_load();
        let n_clients = cfg.members.max(1);
        for i in 0..n_clients {
            // Every group gets members; beyond one each, groups differ in size.
            let g = if i < n_groups {
                i
            } else {
                w.rng.below(n_groups as u64) as usize
            };
            let c = Client::new(&mut w, i, g);
            w.groups[g].clients.push(i);
            w.clients.push(c);
            let start = T0 + w.rng.range(0, 5000);
            w.wake_client_at(i, start);
        }
        w.txn_clients_new();
        if let Some(mean) = w.p.crash_mean_ms {
            let at = w.now + w.rng.exp(mean);
            w.push(at, Ev::Crash);
        }
        if let Some(mean) = w.p.disk_fault_mean_ms {
            for s in 0..w.slots.len() {
                let at = w.now + w.rng.exp(mean);
                w.push(at, Ev::DiskFault(s));
            }
            let at = w.now + w.rng.exp(mean);
            w.push(at, Ev::JournalFault);
        }
        w
    }

    pub fn push(&mut self, at: i64, ev: Ev) {
        self.qseq += 1;
        self.queue.push(Reverse(Queued {
            at: at.max(self.now),
            seq: self.qseq,
            ev,
        }));
    }

    /// Record a broken invariant; the run stops after this step.
    pub fn fail(&mut self, msg: String) {
        if self.failure.is_none() {
            self.failure = Some(msg);
        }
    }

    pub fn trace(&mut self, f: impl FnOnce() -> String) {
        if self.cfg.trace {
            let line = format!("[{} +{}ms] {}", self.step, self.now - T0, f());
            eprintln!("{line}");
        }
    }

    fn note(&mut self, what: String) {
        if self.recent.len() == RECENT {
            self.recent.pop_front();
        }
        self.recent.push_back(what);
    }

    fn digest(&mut self, a: u64, b: u64) {
        let mut h = self.stats.digest ^ 0xcbf2_9ce4_8422_2325;
        for x in [self.now as u64, a, b] {
            h ^= x;
            h = h.wrapping_mul(0x0000_0100_0000_01b3);
        }
        self.stats.digest = h;
    }

    pub fn run(&mut self) -> Result<SimStats, Box<SimFailure>> {
        let fault_steps = self.cfg.steps;
        let mut settle_end = None;
        let mut next_probe = 0;
        while let Some(Reverse(q)) = self.queue.pop() {
            if self.step >= fault_steps && settle_end.is_none() {
                settle_end = Some(self.now + SETTLE_MS);
                // Not before whatever the faults left in flight (slow messages, requests the
                // clients already gave up on) has landed.
                next_probe = self.now + 25_000;
                self.begin_settle();
            }
            if let Some(end) = settle_end {
                if q.at > end {
                    self.queue.push(Reverse(q));
                    break;
                }
                if q.at >= next_probe {
                    next_probe = q.at + 2000;
                    if self.converged_now() {
                        self.queue.push(Reverse(q));
                        break;
                    }
                }
            }
            self.process(q.at, q.ev);
            if let Some(msg) = self.failure.take() {
                return Err(self.failure_report(msg));
            }
        }
        if settle_end.is_none() {
            // The queue ran dry during the fault phase (cannot happen while clients live, but
            // an empty run must still settle and be checked).
            self.begin_settle();
        }
        self.drain();
        if let Some(msg) = self.failure.take() {
            return Err(self.failure_report(msg));
        }
        self.check_converged();
        if self.failure.is_none() {
            self.check_all();
        }
        if let Some(msg) = self.failure.take() {
            return Err(self.failure_report(msg));
        }
        self.stats.steps = self.step;
        self.stats.sim_ms = (self.now - T0) as u64;
        Ok(self.stats.clone())
    }

    fn process(&mut self, at: i64, ev: Ev) {
        self.now = at;
        self.step += 1;
        let what = self.describe(&ev);
        self.digest(what.0, what.1);
        if self.cfg.trace {
            let d = what.2.clone();
            self.trace(|| d);
        }
        self.note(format!("[{} +{}ms] {}", self.step, self.now - T0, what.2));
        self.handle(ev);
        if self.failure.is_none() {
            self.check_touched();
        }
        self.touched.clear();
    }

    /// The end of the run: let what is in flight land (writes, responses, the requests they
    /// trigger) without starting anything new — no client timers, no deadlines — so clients and
    /// coordinator can be compared.
    fn drain(&mut self) {
        let limit = self.now + 30_000;
        while let Some(Reverse(q)) = self.queue.pop() {
            if q.at > limit {
                break;
            }
            if matches!(q.ev, Ev::ClientWake(_) | Ev::Tick { .. }) {
                continue;
            }
            self.process(q.at, q.ev);
            if self.failure.is_some() {
                return;
            }
        }
    }

    /// Whether the settle phase can end: partitions quiet and every group converged.
    fn converged_now(&self) -> bool {
        (0..self.slots.len()).all(|s| self.quiescent(s) && (self.slots[s].parked_len() == 0))
            && (0..self.groups.len()).all(|g| self.converged(g).is_ok())
            && self.txn_converged().is_ok()
    }

    fn failure_report(&self, msg: String) -> Box<SimFailure> {
        Box::new(SimFailure {
            seed: self.seed,
            step: self.step,
            sim_ms: self.now - T0,
            message: msg,
            recent: self.recent.iter().cloned().collect(),
            replay: self.cfg.replay_command(self.seed),
        })
    }

    /// Stop injecting faults: the broker comes back, disks heal, the network becomes reliable
    /// and cut-off clients reconnect. Clients keep their behaviour otherwise (but stop crashing
    /// and leaving), so the groups must converge to a stable state.
    fn begin_settle(&mut self) {
        self.settling = true;
        self.trace(|| "settle: faults off".into());
        if !self.broker_up {
            self.push(self.now, Ev::Restart);
        }
        for s in 0..self.slots.len() {
            if self.slots[s].disk_failing {
                let inc = self.incarnation;
                self.push(self.now, Ev::DiskHeal { p: s, inc });
            }
        }
        if self.journal.failing {
            let inc = self.incarnation;
            self.push(self.now, Ev::JournalHeal { inc });
        }
        for c in 0..self.clients.len() {
            self.clients[c].cut_off_until = 0;
            self.wake_client_at(c, self.now);
        }
    }

    /// (digest a, digest b, description) of an event.
    fn describe(&self, ev: &Ev) -> (u64, u64, String) {
        match ev {
            Ev::ToBroker(m) => (
                1,
                m.corr,
                format!(
                    "request c{} #{} {} v{}: {}",
                    m.client,
                    m.corr,
                    self.groups[m.group].name,
                    m.version,
                    summarize_request(&m.req)
                ),
            ),
            Ev::ToClient {
                client,
                corr,
                reply,
                ..
            } => (
                2,
                *corr,
                format!(
                    "reply to c{client} #{corr}: {}",
                    summarize_reply(reply.as_ref())
                ),
            ),
            Ev::ClientWake(c) => (3, *c as u64, format!("wake c{c}")),
            Ev::WriterStart { p, .. } => (4, *p as u64, format!("writer start p{p}")),
            Ev::WriterDone { p, .. } => (5, *p as u64, format!("writer done p{p}")),
            Ev::Tick { p, .. } => (6, *p as u64, format!("tick p{p}")),
            Ev::ReloadRetry { p, .. } => (7, *p as u64, format!("reload retry p{p}")),
            Ev::DiskFault(p) => (8, *p as u64, format!("disk fault p{p}")),
            Ev::DiskHeal { p, .. } => (9, *p as u64, format!("disk heal p{p}")),
            Ev::JournalStart { .. } => (12, 0, "journal round start".into()),
            Ev::JournalDone { .. } => (13, 0, "journal round done".into()),
            Ev::CheckpointDone { .. } => (14, 0, "journal checkpoint done".into()),
            Ev::JournalFault => (15, 0, "journal disk fault".into()),
            Ev::JournalHeal { .. } => (16, 0, "journal disk heal".into()),
            Ev::Crash => (10, 0, "BROKER CRASH".into()),
            Ev::Restart => (11, 0, "broker restart".into()),
            Ev::Assigned { p, pending, .. } => (
                12,
                *p as u64,
                format!("assignment of {} done p{p}", pending.job.group()),
            ),
            Ev::TxnToBroker(m) => (
                20,
                m.corr,
                format!(
                    "txn request t{} #{}: {}",
                    m.client,
                    m.corr,
                    brief_call(&m.call)
                ),
            ),
            Ev::TxnToClient {
                client,
                corr,
                reply,
            } => (
                21,
                *corr,
                format!("txn reply to t{client} #{corr}: {reply:?}"),
            ),
            Ev::TxnWake(c) => (22, *c as u64, format!("wake t{c}")),
            Ev::TxnWriterDone { .. } => (23, 0, "txn writer done".into()),
            Ev::TxnTick { .. } => (24, 0, "txn tick".into()),
            Ev::MarkerSend { job, s, .. } => (25, *job, format!("marker job {job} to p{s}")),
            Ev::TxnVerified {
                msg, group, tag, ..
            } => (
                26,
                msg.corr,
                format!(
                    "txn offsets of t{} #{} verified in {tag:?}, to group-{group}",
                    msg.client, msg.corr
                ),
            ),
        }
    }

    fn handle(&mut self, ev: Ev) {
        match ev {
            Ev::ToBroker(m) => self.on_request(*m),
            Ev::ToClient {
                client,
                corr,
                reply,
                load,
            } => {
                self.touched.insert(self.clients[client].group);
                self.client_reply(client, corr, *reply, load);
            }
            Ev::ClientWake(c) => {
                if self.clients[c].wake_at == Some(self.now) {
                    self.clients[c].wake_at = None;
                    self.touched.insert(self.clients[c].group);
                    self.client_wake(c);
                }
            }
            Ev::WriterStart { p, inc } => {
                if inc == self.incarnation && self.broker_up {
                    self.writer_start(p);
                }
            }
            Ev::WriterDone { p, inc } => {
                if inc == self.incarnation && self.broker_up {
                    self.writer_done(p);
                }
            }
            Ev::Tick { p, inc } => {
                if inc == self.incarnation && self.broker_up {
                    self.on_tick(p);
                }
            }
            Ev::ReloadRetry { p, inc } => {
                if inc == self.incarnation && self.broker_up {
                    self.try_reload(p);
                }
            }
            Ev::DiskFault(p) => {
                if !self.settling {
                    self.disk_fault(p);
                    if let Some(mean) = self.p.disk_fault_mean_ms {
                        let at = self.now + self.rng.exp(mean);
                        self.push(at, Ev::DiskFault(p));
                    }
                }
            }
            Ev::DiskHeal { p, inc } => {
                if inc == self.incarnation {
                    self.disk_heal(p);
                }
            }
            Ev::JournalStart { inc } => {
                if inc == self.incarnation && self.broker_up {
                    self.journal_start();
                }
            }
            Ev::JournalDone { inc } => {
                if inc == self.incarnation && self.broker_up {
                    self.journal_done();
                }
            }
            Ev::CheckpointDone { inc } => {
                if inc == self.incarnation && self.broker_up {
                    self.checkpoint_done();
                }
            }
            Ev::JournalFault => {
                if !self.settling {
                    self.journal_fault();
                    if let Some(mean) = self.p.disk_fault_mean_ms {
                        let at = self.now + self.rng.exp(mean);
                        self.push(at, Ev::JournalFault);
                    }
                }
            }
            Ev::JournalHeal { inc } => {
                if inc == self.incarnation {
                    self.journal_heal();
                }
            }
            Ev::Crash => {
                if !self.settling && self.broker_up {
                    self.crash();
                }
                if !self.settling {
                    if let Some(mean) = self.p.crash_mean_ms {
                        let at = self.now + self.rng.exp(mean);
                        self.push(at, Ev::Crash);
                    }
                }
            }
            Ev::Restart => {
                if !self.broker_up {
                    self.restart();
                }
            }
            Ev::Assigned { p, inc, pending } => {
                if inc == self.incarnation && self.broker_up {
                    self.assignment_done(p, *pending);
                }
            }
            Ev::TxnToBroker(m) => self.txn_on_request(*m),
            Ev::TxnToClient {
                client,
                corr,
                reply,
            } => self.txn_client_reply(client, corr, *reply),
            Ev::TxnWake(c) => self.txn_client_wake(c),
            Ev::TxnWriterDone { inc } => {
                if inc == self.incarnation && self.broker_up {
                    self.txn_writer_done();
                }
            }
            Ev::TxnTick { inc } => {
                if inc == self.incarnation && self.broker_up {
                    self.txn_tick();
                }
            }
            Ev::MarkerSend { job, s, inc, load } => {
                if inc == self.incarnation && self.broker_up && load == self.txn.load {
                    self.txn_marker_send(job, s);
                }
            }
            Ev::TxnVerified {
                msg,
                group,
                tag,
                inc,
            } => {
                if inc == self.incarnation && self.broker_up {
                    self.txn_commit_to_group(*msg, group, tag);
                }
            }
        }
    }

    /// Send a request from client `c` over the network.
    pub fn send_request(&mut self, c: usize, version: i16, req: GroupRequest) -> u64 {
        let corr = self.next_corr;
        self.next_corr += 1;
        let group = self.clients[c].group;
        let msg = ReqMsg {
            client: c,
            corr,
            group,
            version,
            req,
            incarnation: if self.broker_up { self.incarnation } else { 0 },
        };
        if self.clients[c].cut_off_until > self.now || !self.broker_up {
            // No connection: the request never leaves (the client times out).
            self.stats.dropped += 1;
            return corr;
        }
        for delay in self.network_delays() {
            let at = self.now + delay;
            self.push(at, Ev::ToBroker(Box::new(msg.clone())));
        }
        corr
    }

    /// Send a reply to client `c`.
    pub fn send_reply(&mut self, c: usize, corr: u64, reply: Reply, load: u64) {
        if self.clients[c].cut_off_until > self.now {
            self.stats.dropped += 1;
            return;
        }
        for delay in self.network_delays() {
            let at = self.now + delay;
            self.push(
                at,
                Ev::ToClient {
                    client: c,
                    corr,
                    reply: Box::new(reply.clone()),
                    load,
                },
            );
        }
    }

    /// The delays of the copies of one message: none (dropped), one, or two (duplicated; the
    /// copies may arrive in either order and after later messages).
    pub(super) fn network_delays(&mut self) -> Vec<i64> {
        if self.settling {
            return vec![self.rng.range(0, self.p.latency_max_ms + 1)];
        }
        if self.rng.chance(self.p.drop_p) {
            self.stats.dropped += 1;
            return Vec::new();
        }
        let copies = if self.rng.chance(self.p.dup_p) {
            self.stats.duplicated += 1;
            2
        } else {
            1
        };
        (0..copies)
            .map(|_| {
                let mut d = self.rng.range(0, self.p.latency_max_ms + 1);
                if self.rng.chance(self.p.slow_p) {
                    d += self.rng.range(1, self.p.slow_max_ms + 1);
                }
                d
            })
            .collect()
    }

    /// Make sure client `c` is woken at `at` (or earlier).
    pub fn wake_client_at(&mut self, c: usize, at: i64) {
        let at = at.max(self.now);
        if self.clients[c].wake_at.is_none_or(|w| at < w) {
            self.clients[c].wake_at = Some(at);
            self.push(at, Ev::ClientWake(c));
        }
    }

    pub fn is_classic(&self, c: usize) -> bool {
        matches!(self.clients[c].proto, Proto::Classic(_))
    }
}

fn brief_call(c: &super::txn::TxnCall) -> String {
    use super::txn::TxnCall;
    match c {
        TxnCall::Coord(r) => format!("{r:?}"),
        TxnCall::OffsetCommit { group, req, .. } => format!(
            "TxnOffsetCommit group-{group} pid={} epoch={} member={:?} gen={} {:?}",
            req.producer_id.0,
            req.producer_epoch,
            req.member_id.as_str(),
            req.generation_id,
            req.topics
                .iter()
                .flat_map(|t| t.partitions.iter().map(move |p| format!(
                    "{}-{}={}",
                    t.name.as_str(),
                    p.partition_index,
                    p.committed_offset
                )))
                .collect::<Vec<_>>()
        ),
        TxnCall::Fetch {
            group,
            require_stable,
            parts,
        } => format!("OffsetFetch group-{group} require_stable={require_stable} {parts:?}"),
    }
}

fn summarize_request(r: &GroupRequest) -> String {
    match r {
        GroupRequest::Join(j) => format!(
            "Join member={:?} instance={:?}",
            j.member_id.as_str(),
            j.group_instance_id.as_deref()
        ),
        GroupRequest::Sync(s) => format!(
            "Sync member={:?} gen={} assignments={}",
            s.member_id.as_str(),
            s.generation_id,
            s.assignments.len()
        ),
        GroupRequest::Heartbeat(h) => format!(
            "Heartbeat member={:?} gen={}",
            h.member_id.as_str(),
            h.generation_id
        ),
        GroupRequest::Leave(l) => format!(
            "Leave member={:?} members={:?}",
            l.member_id.as_str(),
            l.members
                .iter()
                .map(|m| m.member_id.to_string())
                .collect::<Vec<_>>()
        ),
        GroupRequest::OffsetCommit(c) => format!(
            "OffsetCommit member={:?} gen/epoch={} {:?}",
            c.member_id.as_str(),
            c.generation_id_or_member_epoch,
            c.topics
                .iter()
                .flat_map(|t| t.partitions.iter().map(move |p| format!(
                    "{}-{}={}",
                    t.name.as_str(),
                    p.partition_index,
                    p.committed_offset
                )))
                .collect::<Vec<_>>()
        ),
        GroupRequest::OffsetFetch { group, .. } => format!("OffsetFetch {group}"),
        GroupRequest::ConsumerHeartbeat(h) => format!(
            "ConsumerHeartbeat member={} epoch={} owned={:?} subscribed={:?}",
            h.member_id.as_str(),
            h.member_epoch,
            h.topic_partitions.as_ref().map(|tps| tps
                .iter()
                .map(|t| (short_id(&t.topic_id), t.partitions.clone()))
                .collect::<Vec<_>>()),
            h.subscribed_topic_names
                .as_ref()
                .map(|n| n.iter().map(|t| t.0.to_string()).collect::<Vec<_>>())
        ),
        other => format!("{other:?}"),
    }
}

fn summarize_reply(r: &Reply) -> String {
    match r {
        Reply::Err(code) => format!("edge error {code}"),
        Reply::Resp(GroupResponse::Join(j)) => format!(
            "Join err={} gen={} member={} leader={} members={}",
            j.error_code,
            j.generation_id,
            j.member_id.as_str(),
            j.leader.as_str(),
            j.members.len()
        ),
        Reply::Resp(GroupResponse::Sync(s)) => {
            format!(
                "Sync err={} assignment={}B",
                s.error_code,
                s.assignment.len()
            )
        }
        Reply::Resp(GroupResponse::Heartbeat(h)) => format!("Heartbeat err={}", h.error_code),
        Reply::Resp(GroupResponse::Leave(l)) => format!("Leave err={}", l.error_code),
        Reply::Resp(GroupResponse::OffsetCommit(c)) => format!(
            "OffsetCommit errs={:?}",
            c.topics
                .iter()
                .flat_map(|t| t.partitions.iter().map(|p| p.error_code))
                .collect::<Vec<_>>()
        ),
        Reply::Resp(GroupResponse::OffsetFetch(f)) => {
            format!("OffsetFetch err={} n={}", f.error_code, f.partitions.len())
        }
        Reply::Resp(GroupResponse::ConsumerHeartbeat(h)) => format!(
            "ConsumerHeartbeat err={} epoch={} assignment={:?}",
            h.error_code,
            h.member_epoch,
            h.assignment.as_ref().map(|a| a
                .topic_partitions
                .iter()
                .map(|t| (short_id(&t.topic_id), t.partitions.clone()))
                .collect::<Vec<_>>())
        ),
        Reply::Resp(other) => format!("{other:?}"),
    }
}

/// The last hex digit of a topic id names it in traces (ids are fixed, see `topics`).
pub(super) fn short_id(id: &uuid::Uuid) -> String {
    let s = id.simple().to_string();
    format!("t{}", &s[s.len() - 1..])
}
