//! Transactions: the simulator's shell around the broker's pure transaction coordinator
//! ([`engine::txn::TxnCoordinator`], one `__transaction_state` partition on its own
//! `PartitionLog<MemDir>`), the markers it writes into the `__consumer_offsets` partitions, and
//! the transactional clients that use both.
//!
//! The shell does what `engine/src/runtime/txn.rs` does, with fake time: the records a request
//! produces are written by one writer (write + fsync of everything queued), every reply and
//! every marker job waits until the records produced before it are durable, a marker job sends
//! `GroupRequest::TxnMarker` to each partition of the transaction (retrying with a doubling
//! backoff until it is durable) and then completes the transaction (`markers_written`). A crash
//! loses what was not written, may tear the batch being written, and the restart replays the log
//! and restarts the unfinished marker jobs (`on_loaded`). The TxnOffsetCommit path is
//! `engine/src/api/txn_offset_commit.rs`, in its three steps: the group's partition hands out a
//! verification guard for the producer (`GroupRequest::TxnGuard`), the transaction coordinator
//! verifies that the group's partition is in the producer's open transaction (KIP-890), then the
//! group's partition handles the request carrying the guard: at once (in the broker the
//! verification's reply and the marker jobs a durable write releases wake in the order they
//! registered), or after a hop of up to `SimConfig::verify_hop_ms` — which lets an abort marker
//! overtake the verified write, the race the guard closes (docs/reliability.md).
//!
//! Transactional clients behave like Kafka's producer with `sendOffsetsToTransaction`
//! (transactions version 1, as Kafka Streams does): InitProducerId, AddOffsetsToTxn (an
//! AddPartitionsToTxn of the group's `__consumer_offsets` partition), one or two TxnOffsetCommit
//! with the member id and generation / member epoch of a current member of the group (now and
//! then a stale one), then EndTxn commit or abort; a fenced producer starts over as a new
//! instance, a TxnOffsetCommit error makes the transaction abort. They also read with
//! OffsetFetch, with and without `require_stable`, and crash (a zombie's requests may still
//! arrive; its open transaction is aborted by the next InitProducerId or its timeout).
//!
//! Not modelled: disk faults of the `__transaction_state` log (crashes and torn writes are),
//! compaction of that log, and transactional data partitions (the simulator has no topic
//! data; the read_committed property is tested at the storage layer, `storage/tests`).

use super::broker::{Route, RouteKind};
use super::world::{Ev, Reply, World};
use engine::group::txn::TxnGuard;
use engine::group::{GroupRequest, GroupResponse, RequestContext};
use engine::partition_core::{Deferred, Refusal};
use engine::txn::{code, MarkerJob, TxnCoordinator, TxnOutput, TxnRecord, TxnRequest, TxnResponse};
use futures_lite::future::block_on;
use kafka_protocol::messages::txn_offset_commit_request::{
    TxnOffsetCommitRequestPartition, TxnOffsetCommitRequestTopic,
};
use kafka_protocol::messages::*;
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::ResponseError;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use storage::io::MemDir;
use storage::log::{LogConfig, PartitionLog};
use wire::records::txn::TransactionLogValue;

const OFFSETS_TOPIC: &str = "__consumer_offsets";

/// A transaction as the oracle names it: (transactional id, producer id, start time) — all in
/// its durable records, so the name survives crashes and reloads. Not the epoch: transactions
/// version 2 bump it at EndTxn, so the epoch a write was verified under and the one its markers
/// carry differ; and in version 1 successive transactions share it, so it never told them
/// apart (the start time does).
pub(super) type TxnKey = (String, i64, i64);

/// What a transactional client sends.
#[derive(Debug, Clone)]
pub(super) enum TxnCall {
    Coord(TxnRequest),
    OffsetCommit {
        group: usize,
        req: TxnOffsetCommitRequest,
        /// Set by the broker: the guard the group's partition gave before the verification.
        guard: TxnGuard,
    },
    Fetch {
        group: usize,
        require_stable: bool,
        parts: Vec<(String, i32)>,
    },
}

#[derive(Debug, Clone)]
pub(super) struct TxnMsg {
    pub client: usize,
    pub corr: u64,
    pub incarnation: u64,
    pub call: TxnCall,
}

#[derive(Debug, Clone)]
pub(super) enum TxnReply {
    /// The transaction coordinator's answer, or the code of a partition that could not answer.
    Coord(Result<TxnResponse, i16>),
    Group(Reply),
}

/// Who waits for a transaction-coordinator reply.
#[derive(Debug, Clone)]
enum Asker {
    Client {
        client: usize,
        corr: u64,
    },
    /// The KIP-890 verification of a TxnOffsetCommit: on success the request goes on to the
    /// group's partition.
    Verify(Box<TxnMsg>),
}

#[derive(Debug)]
enum Waiting {
    Reply(Asker, TxnResponse),
    Job(MarkerJob),
}

/// A marker job under way.
#[derive(Debug, Clone)]
pub(super) struct JobRun {
    pub job: MarkerJob,
    pub key: TxnKey,
    /// Slots still without a durable marker.
    pub left: BTreeSet<usize>,
    /// Backoff per slot (ms), doubling to 5 s as in `write_marker`.
    pub backoff: BTreeMap<usize, i64>,
}

/// The `__transaction_state` partition.
#[derive(Default)]
pub(super) struct TxnHost {
    pub dir: MemDir,
    pub coord: Option<TxnCoordinator>,
    log: Option<PartitionLog<MemDir>>,
    pending: Vec<TxnRecord>,
    produced: u64,
    durable: u64,
    writing: bool,
    waiting: Vec<(u64, Waiting)>,
    askers: BTreeMap<u64, Asker>,
    next_rid: u64,
    pub jobs: BTreeMap<u64, JobRun>,
    next_job: u64,
    tick_at: Option<i64>,
    /// Increments with every load: events of an earlier load are void.
    pub load: u64,
}

/// A transactional client's step.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum TStep {
    Init,
    Idle,
    Add,
    Commit,
    End { commit: bool },
    Fetch { require_stable: bool },
}

#[derive(Debug, Clone)]
pub(super) struct TxnClient {
    pub group: usize,
    pub tid: String,
    pub alive: bool,
    pub restart_at: Option<i64>,
    pub pid: i64,
    pub epoch: i16,
    pub step: TStep,
    /// The request waiting for its answer: (correlation id, deadline, what to resend).
    pub outstanding: Option<(u64, i64, TxnCall)>,
    pub next_at: i64,
    pub wake_at: Option<i64>,
    pub timeout_ms: i32,
    pub request_timeout: i64,
    pub commits_left: u32,
    /// A TxnOffsetCommit failed: the transaction can only abort.
    pub abortable: bool,
    /// The transaction protocol the client speaks: 0 (v1: explicit AddPartitionsToTxn, the
    /// epoch kept across transactions) or 2 (KIP-890 v2: TxnOffsetCommit v5 adds the group's
    /// partition, EndTxn v5 bumps the epoch and may move to a new producer id).
    pub tv: i16,
}

fn sb(s: &str) -> StrBytes {
    StrBytes::from_string(s.to_string())
}

fn encode(records: &[TxnRecord]) -> Vec<(Vec<u8>, Option<Vec<u8>>)> {
    records
        .iter()
        .map(|(id, v)| {
            let key = wire::records::txn::encode_key(id).expect("a transactional id encodes");
            let value = v.as_ref().map(|v| {
                v.encode(engine::txn::log_value_version(TRANSACTION_VERSION))
                    .expect("a transaction value encodes")
            });
            (key, value)
        })
        .collect()
}

/// The finalized `transaction.version` of the simulated broker: 2, a new data directory's
/// (`engine/src/features.rs`); clients speak 0 or 2 (`TxnClient::tv`).
const TRANSACTION_VERSION: i16 = 2;

fn txn_log_config() -> LogConfig {
    LogConfig {
        segment_bytes: 4096,
        ..LogConfig::default()
    }
}

/// The api layer's translation of a failed verification (`api/txn_offset_commit.rs`).
fn verify_error(c: i16) -> i16 {
    use ResponseError as E;
    match E::try_from_code(c) {
        Some(E::ProducerFenced) => E::InvalidProducerEpoch.code(),
        Some(E::ConcurrentTransactions | E::CoordinatorLoadInProgress | E::NotCoordinator) => {
            E::CoordinatorNotAvailable.code()
        }
        _ => c,
    }
}

impl World {
    pub(super) fn txn_clients_new(&mut self) {
        for i in 0..self.cfg.txn_clients {
            let group = self.rng.below(self.groups.len() as u64) as usize;
            let c = TxnClient {
                group,
                tid: format!("txn-{i}"),
                alive: true,
                restart_at: None,
                pid: -1,
                epoch: -1,
                step: TStep::Init,
                outstanding: None,
                next_at: 0,
                wake_at: None,
                timeout_ms: *self.rng.pick(&[3_000, 10_000, 60_000]),
                request_timeout: self.rng.range(1500, 4001),
                commits_left: 0,
                abortable: false,
                // Half the clients of each kind, without a draw (existing seeds keep their runs).
                tv: if i % 2 == 0 { 2 } else { 0 },
            };
            self.tclients.push(c);
            let at = super::world::T0 + self.rng.range(0, 5000);
            self.txn_wake_at(i, at);
        }
    }

    pub(super) fn txn_wake_at(&mut self, c: usize, at: i64) {
        let at = at.max(self.now);
        if self.tclients[c].wake_at.is_none_or(|w| at < w) {
            self.tclients[c].wake_at = Some(at);
            self.push(at, Ev::TxnWake(c));
        }
    }

    // ---- the transaction coordinator's shell ----

    /// Load the `__transaction_state` partition from its disk (start, restart).
    pub(super) fn txn_load(&mut self) {
        let mut coord = TxnCoordinator::new(engine::txn::TxnConfig {
            // Kafka's defaults, with a shorter abort check so timed-out transactions of
            // crashed clients end within a run.
            abort_check_interval_ms: 1000,
            ..Default::default()
        });
        coord.set_transaction_version(TRANSACTION_VERSION);
        let mut skipped = 0u64;
        let opened = block_on(PartitionLog::open(
            self.txn.dir.clone(),
            txn_log_config(),
            |_, _, k, v| {
                let Some(id) = k.and_then(|k| wire::records::txn::decode_key(k).ok()) else {
                    skipped += 1;
                    return;
                };
                let value = match v.map(TransactionLogValue::decode) {
                    None => None,
                    Some(Ok(v)) => Some(v),
                    Some(Err(_)) => {
                        skipped += 1;
                        return;
                    }
                };
                coord.replay(&(id, value));
            },
        ));
        let log = match opened {
            Ok((log, _)) => log,
            Err(e) => return self.fail(format!("__transaction_state failed to load: {e}")),
        };
        if skipped > 0 {
            self.fail(format!(
                "__transaction_state: {skipped} records did not decode"
            ));
        }
        let jobs = coord.on_loaded(self.now);
        let h = &mut self.txn;
        h.coord = Some(coord);
        h.log = Some(log);
        h.pending.clear();
        h.produced = 0;
        h.durable = 0;
        h.writing = false;
        h.waiting.clear();
        h.askers.clear();
        h.jobs.clear();
        h.tick_at = None;
        h.load += 1;
        for job in jobs {
            self.txn_start_job(job);
        }
        self.txn_schedule_tick();
    }

    /// Power loss: the batch being written may be torn, the rest of the memory is gone.
    pub(super) fn txn_crash(&mut self) {
        if self.txn.writing && !self.txn.pending.is_empty() && self.rng.chance(0.5) {
            // The write was under way: cut it after a random number of its I/O operations.
            let ops = self.rng.below(3);
            self.txn.dir.fail_after(ops);
            let pairs = encode(&self.txn.pending);
            if let Some(log) = self.txn.log.as_mut() {
                let _ = block_on(log.append_pairs(&pairs, self.now));
            }
        }
        let mode = self.rng.below(3);
        let mut rng = self.rng.clone();
        self.txn.dir.crash(|_, unsynced| match mode {
            0 => 0,
            1 => unsynced,
            _ => rng.below(unsynced as u64 + 1) as usize,
        });
        self.rng = rng;
        self.txn.dir.heal();
        let h = &mut self.txn;
        h.coord = None;
        h.log = None;
        h.pending.clear();
        h.waiting.clear();
        h.askers.clear();
        h.jobs.clear();
        h.writing = false;
        h.tick_at = None;
    }

    /// Run one request on the transaction coordinator.
    fn txn_handle(&mut self, asker: Asker, mut req: TxnRequest) {
        if let TxnRequest::InitProducerId {
            fresh_producer_id, ..
        } = &mut req
        {
            // The shell reserves a producer id no one had (`producer_ids.rs`).
            *fresh_producer_id = self.next_pid;
            self.next_pid += 1;
        }
        if let TxnRequest::EndTxn {
            client_tv,
            producer_epoch,
            fresh_producer_id,
            ..
        } = &mut req
        {
            // As `api/end_txn.rs`: a v2 end whose epoch is exhausted gets a fresh id.
            if *client_tv >= 2 && engine::txn::epoch_exhausted(*producer_epoch) {
                *fresh_producer_id = Some(self.next_pid);
                self.next_pid += 1;
            }
        }
        let rid = self.txn.next_rid;
        self.txn.next_rid += 1;
        self.txn.askers.insert(rid, asker);
        let mut out = TxnOutput::default();
        let Some(coord) = self.txn.coord.as_mut() else {
            return;
        };
        coord.handle(rid, req, self.now, &mut out);
        self.txn_submit(out);
    }

    /// `TxnTable::submit`: records to the writer; replies and marker jobs wait until every
    /// record produced before them is durable.
    fn txn_submit(&mut self, out: TxnOutput) {
        let h = &mut self.txn;
        h.produced += out.records.len() as u64;
        h.pending.extend(out.records);
        let needs = h.produced;
        for (rid, resp) in out.replies {
            if let Some(a) = h.askers.remove(&rid) {
                h.waiting.push((needs, Waiting::Reply(a, resp)));
            }
        }
        for job in out.markers {
            h.waiting.push((needs, Waiting::Job(job)));
        }
        if !h.pending.is_empty() && !h.writing {
            h.writing = true;
            let latency = self.rng.range(0, self.p.fsync_max_ms + 1);
            let inc = self.incarnation;
            self.push(self.now + latency, Ev::TxnWriterDone { inc });
        }
        self.txn_release();
        self.txn_schedule_tick();
    }

    /// The writer: everything queued, one write and one fsync.
    pub(super) fn txn_writer_done(&mut self) {
        let h = &mut self.txn;
        h.writing = false;
        let records = std::mem::take(&mut h.pending);
        if records.is_empty() {
            return;
        }
        let pairs = encode(&records);
        let log = h.log.as_mut().expect("a running partition has a log");
        match block_on(log.append_pairs(&pairs, self.now)) {
            Ok(_) => {
                h.durable += records.len() as u64;
                self.txn_release();
                if !self.txn.pending.is_empty() {
                    self.txn.writing = true;
                    let inc = self.incarnation;
                    self.push(self.now, Ev::TxnWriterDone { inc });
                }
            }
            Err(e) => self.fail(format!(
                "__transaction_state write failed on a healthy disk: {e}"
            )),
        }
    }

    fn txn_release(&mut self) {
        let durable = self.txn.durable;
        let ready: Vec<Waiting> = {
            let w = &mut self.txn.waiting;
            let (ready, rest): (Vec<_>, Vec<_>) = w.drain(..).partition(|(n, _)| *n <= durable);
            *w = rest;
            ready.into_iter().map(|(_, x)| x).collect()
        };
        for x in ready {
            match x {
                Waiting::Reply(Asker::Client { client, corr }, resp) => {
                    self.txn_send_reply(client, corr, TxnReply::Coord(Ok(resp)));
                }
                Waiting::Reply(Asker::Verify(msg), resp) => self.txn_verified(*msg, resp),
                Waiting::Job(job) => self.txn_start_job(job),
            }
        }
    }

    pub(super) fn txn_schedule_tick(&mut self) {
        let Some(d) = self.txn.coord.as_ref().map(|c| c.next_deadline()) else {
            return;
        };
        let at = (d.max(self.now + 1) + 4) / 5 * 5;
        if self.txn.tick_at.is_none_or(|t| at < t) {
            self.txn.tick_at = Some(at);
            let inc = self.incarnation;
            self.push(at, Ev::TxnTick { inc });
        }
    }

    pub(super) fn txn_tick(&mut self) {
        if self.txn.tick_at != Some(self.now) {
            return;
        }
        self.txn.tick_at = None;
        let mut out = TxnOutput::default();
        if let Some(c) = self.txn.coord.as_mut() {
            if c.next_deadline() <= self.now {
                c.tick(self.now, &mut out);
            }
        }
        self.txn_submit(out);
    }

    /// The current transaction of `tid` as the oracle names it (an open or ending one).
    fn txn_key(&self, tid: &str) -> Option<TxnKey> {
        let m = self.txn.coord.as_ref()?.get(tid)?;
        Some((tid.to_string(), m.producer_id, m.start_ms))
    }

    /// A prepare record is durable: its markers go out.
    fn txn_start_job(&mut self, job: MarkerJob) {
        let Some(key) = self.txn_key(&job.transactional_id) else {
            return;
        };
        self.oracle_txn_decided(&key, job.commit);
        let left: BTreeSet<usize> = job
            .partitions
            .iter()
            .filter(|(t, p)| t == OFFSETS_TOPIC && *p >= 0 && (*p as usize) < self.slots.len())
            .map(|(_, p)| *p as usize)
            .collect();
        let jid = self.txn.next_job;
        self.txn.next_job += 1;
        self.trace(|| {
            format!(
                "txn job {jid}: {} {} of {key:?} to {left:?}",
                job.transactional_id,
                if job.commit { "COMMIT" } else { "ABORT" }
            )
        });
        let run = JobRun {
            job,
            key,
            left: left.clone(),
            backoff: BTreeMap::new(),
        };
        self.txn.jobs.insert(jid, run);
        if left.is_empty() {
            return self.txn_job_done(jid);
        }
        for s in left {
            self.txn_marker_send(jid, s);
        }
    }

    /// `write_marker`: one marker to slot `s`, through the partition's request path.
    pub(super) fn txn_marker_send(&mut self, jid: u64, s: usize) {
        let Some(run) = self.txn.jobs.get(&jid) else {
            return;
        };
        if !run.left.contains(&s) {
            return;
        }
        let req = GroupRequest::TxnMarker {
            producer_id: run.job.producer_id,
            producer_epoch: run.job.producer_epoch,
            commit: run.job.commit,
            coordinator_epoch: 0,
        };
        let admitted = match self.slots[s].core.as_mut().map(|c| c.admit()) {
            Some(Ok(())) if self.now < self.slots[s].loading_until => Err(Refusal::Loading),
            Some(r) => r,
            None => Err(Refusal::Unavailable),
        };
        if admitted.is_err() {
            return self.txn_marker_retry(jid, s);
        }
        let group = (0..self.groups.len())
            .find(|g| self.groups[*g].partition == s)
            .unwrap_or(0);
        let kind = RouteKind::Marker { job: jid };
        self.txn_group_run(
            s,
            group,
            usize::MAX,
            0,
            kind,
            "transaction-coordinator",
            req,
        );
    }

    fn txn_marker_retry(&mut self, jid: u64, s: usize) {
        let Some(run) = self.txn.jobs.get_mut(&jid) else {
            return;
        };
        let b = run.backoff.entry(s).or_insert(20);
        let at = self.now + *b;
        *b = (*b * 2).min(5000);
        let (inc, load) = (self.incarnation, self.txn.load);
        self.push(
            at,
            Ev::MarkerSend {
                job: jid,
                s,
                inc,
                load,
            },
        );
    }

    /// A marker's answer was released (durable, or failed).
    pub(super) fn txn_marker_reply(&mut self, jid: u64, s: usize, code: i16) {
        if code != 0 {
            return self.txn_marker_retry(jid, s);
        }
        let Some(run) = self.txn.jobs.get_mut(&jid) else {
            return;
        };
        run.left.remove(&s);
        if run.left.is_empty() {
            self.txn_job_done(jid);
        }
    }

    fn txn_job_done(&mut self, jid: u64) {
        let Some(run) = self.txn.jobs.remove(&jid) else {
            return;
        };
        if run.job.commit {
            self.stats.txn_committed += 1;
        } else {
            self.stats.txn_aborted += 1;
        }
        let mut out = TxnOutput::default();
        if let Some(c) = self.txn.coord.as_mut() {
            c.markers_written(&run.job, self.now, &mut out);
        }
        self.txn_submit(out);
    }

    /// Run a group request for the transaction machinery (a client's TxnOffsetCommit or
    /// OffsetFetch, or a marker) on slot `s`, as `on_request` does for members.
    #[allow(clippy::too_many_arguments)]
    fn txn_group_run(
        &mut self,
        s: usize,
        group: usize,
        client: usize,
        corr: u64,
        kind: RouteKind,
        client_id: &str,
        req: GroupRequest,
    ) {
        let id = self.next_req;
        self.next_req += 1;
        self.routes.insert(
            id,
            Route {
                client,
                corr,
                group,
                kind,
                ghost: false,
            },
        );
        let ctx = Arc::new(RequestContext {
            client_id: client_id.into(),
            client_host: "/10.0.0.2".into(),
            api_version: match &req {
                GroupRequest::OffsetFetch { .. } => 8,
                _ => 3,
            },
            topics: self.topics.clone(),
            group_configs: Default::default(),
            topic_filter: None,
        });
        self.touched.insert(group);
        let core = self.slots[s]
            .core
            .as_mut()
            .expect("an admitted request has a core");
        if core.must_wait() {
            core.defer(Deferred {
                id,
                ctx,
                req,
                tag: (),
            });
            self.stats.deferred += 1;
            return;
        }
        self.run_request(s, id, &ctx, req);
    }

    /// A request of a transactional client reaches the broker.
    pub(super) fn txn_on_request(&mut self, m: TxnMsg) {
        if !self.broker_up || m.incarnation != self.incarnation {
            self.stats.dropped += 1;
            return;
        }
        self.stats.requests += 1;
        match m.call.clone() {
            TxnCall::Coord(req) => self.txn_handle(
                Asker::Client {
                    client: m.client,
                    corr: m.corr,
                },
                req,
            ),
            TxnCall::OffsetCommit { group, ref req, .. } => {
                // First the guard, from the group's partition (answered at once, nothing
                // written), as `api/txn_offset_commit.rs` asks for it before verifying.
                let pid = req.producer_id.0;
                let guard = match self.txn_begin_guard(&m, group, pid) {
                    Ok(g) => g,
                    Err(code) => {
                        let code = if code == ResponseError::ConcurrentTransactions.code() {
                            ResponseError::CoordinatorNotAvailable.code()
                        } else {
                            code
                        };
                        let reply = TxnReply::Group(Reply::Err(code));
                        return self.txn_send_reply(m.client, m.corr, reply);
                    }
                };
                let mut m = m;
                if let TxnCall::OffsetCommit { guard: g, .. } = &mut m.call {
                    *g = guard;
                }
                let TxnCall::OffsetCommit { ref req, .. } = m.call else {
                    unreachable!("an offset commit");
                };
                let verify = TxnRequest::AddPartitions {
                    transactional_id: req.transactional_id.0.to_string(),
                    producer_id: req.producer_id.0,
                    producer_epoch: req.producer_epoch,
                    partitions: vec![(
                        OFFSETS_TOPIC.to_string(),
                        self.groups[group].partition as i32,
                    )],
                    // A v2 client's TxnOffsetCommit (v5) adds the partition; v1 only verifies
                    // (`api/txn_offset_commit.rs`).
                    verify_only: self.tclients[m.client].tv < 2,
                    client_tv: self.tclients[m.client].tv,
                };
                self.txn_handle(Asker::Verify(Box::new(m)), verify);
            }
            TxnCall::Fetch {
                group,
                require_stable,
                ref parts,
            } => {
                let mut by_topic: BTreeMap<String, Vec<i32>> = BTreeMap::new();
                for (t, p) in parts {
                    by_topic.entry(t.clone()).or_default().push(*p);
                }
                let req = GroupRequest::OffsetFetch {
                    group: self.groups[group].name.clone(),
                    topics: Some(by_topic.into_iter().collect()),
                    member_id: None,
                    member_epoch: -1,
                    require_stable,
                };
                self.txn_to_group(m, group, RouteKind::TxnFetch { require_stable }, req);
            }
        }
    }

    fn txn_to_group(&mut self, m: TxnMsg, group: usize, kind: RouteKind, req: GroupRequest) {
        let s = self.groups[group].partition;
        let admitted = match self.slots[s].core.as_mut().map(|c| c.admit()) {
            Some(Ok(())) if self.now < self.slots[s].loading_until => Err(Refusal::Loading),
            Some(r) => r,
            None => Err(Refusal::Unavailable),
        };
        if let Err(refusal) = admitted {
            let code = match refusal {
                Refusal::Loading => ResponseError::CoordinatorLoadInProgress.code(),
                Refusal::Unavailable => ResponseError::CoordinatorNotAvailable.code(),
            };
            return self.txn_send_reply(m.client, m.corr, TxnReply::Group(Reply::Err(code)));
        }
        let client_id = self.tclients[m.client].tid.clone();
        self.txn_group_run(s, group, m.client, m.corr, kind, &client_id, req);
    }

    /// The verification of a TxnOffsetCommit answered: on to the group's partition (after the
    /// hop between shards), or the api layer's error.
    fn txn_verified(&mut self, msg: TxnMsg, resp: TxnResponse) {
        let TxnCall::OffsetCommit { group, req, .. } = &msg.call else {
            return;
        };
        let code = match &resp {
            TxnResponse::AddPartitions(codes) => codes.first().copied().unwrap_or(0),
            _ => code::INVALID_REQUEST,
        };
        if code != 0 {
            let code = verify_error(code);
            let mut r = TxnOffsetCommitResponse::default();
            for t in &req.topics {
                let mut rt = txn_offset_commit_response::TxnOffsetCommitResponseTopic::default()
                    .with_name(t.name.clone());
                for p in &t.partitions {
                    rt.partitions.push(
                        txn_offset_commit_response::TxnOffsetCommitResponsePartition::default()
                            .with_partition_index(p.partition_index)
                            .with_error_code(code),
                    );
                }
                r.topics.push(rt);
            }
            let reply = TxnReply::Group(Reply::Resp(GroupResponse::TxnOffsetCommit(r)));
            return self.txn_send_reply(msg.client, msg.corr, reply);
        }
        let tag = self.txn_key(req.transactional_id.0.as_str());
        let group = *group;
        if self.cfg.verify_hop_ms <= 0 {
            // At once: before any marker job released by the same durable write (the broker
            // wakes them in the order they registered).
            return self.txn_commit_to_group(msg, group, tag);
        }
        let hop = self.rng.range(0, self.cfg.verify_hop_ms + 1);
        let inc = self.incarnation;
        self.push(
            self.now + hop,
            Ev::TxnVerified {
                msg: Box::new(msg),
                group,
                tag,
                inc,
            },
        );
    }

    /// After the hop: the group's partition handles the verified TxnOffsetCommit.
    pub(super) fn txn_commit_to_group(&mut self, msg: TxnMsg, group: usize, tag: Option<TxnKey>) {
        let TxnCall::OffsetCommit { req, guard, .. } = msg.call.clone() else {
            return;
        };
        let parts = req
            .topics
            .iter()
            .flat_map(|t| {
                t.partitions
                    .iter()
                    .map(move |p| (t.name.to_string(), p.partition_index, p.committed_offset))
            })
            .collect();
        let kind = RouteKind::TxnCommit {
            producer_id: req.producer_id.0,
            tag,
            parts,
        };
        self.txn_to_group(msg, group, kind, GroupRequest::TxnOffsetCommit(req, guard));
    }

    /// The first step of a TxnOffsetCommit: the group's partition (refusing as `txn_to_group`
    /// would) runs `GroupRequest::TxnGuard` through the coordinator's `handle`, as the broker's
    /// partition does; it writes nothing, so its answer is there at once.
    fn txn_begin_guard(&mut self, m: &TxnMsg, group: usize, pid: i64) -> Result<TxnGuard, i16> {
        let s = self.groups[group].partition;
        let admitted = match self.slots[s].core.as_mut().map(|c| c.admit()) {
            Some(Ok(())) if self.now < self.slots[s].loading_until => Err(Refusal::Loading),
            Some(r) => r,
            None => Err(Refusal::Unavailable),
        };
        if let Err(refusal) = admitted {
            return Err(match refusal {
                Refusal::Loading => ResponseError::CoordinatorLoadInProgress.code(),
                Refusal::Unavailable => ResponseError::CoordinatorNotAvailable.code(),
            });
        }
        let id = self.next_req;
        self.next_req += 1;
        let ctx = RequestContext {
            client_id: self.tclients[m.client].tid.clone(),
            client_host: "/10.0.0.2".into(),
            api_version: 3,
            topics: self.topics.clone(),
            group_configs: Default::default(),
            topic_filter: None,
        };
        let mut out = engine::group::Output::default();
        self.slots[s]
            .coordinator_mut()
            .expect("an admitted partition has a coordinator")
            .handle(
                id,
                &ctx,
                GroupRequest::TxnGuard { producer_id: pid },
                self.now,
                &mut out,
            );
        assert!(
            out.records.is_empty() && out.txn.is_none(),
            "a guard writes nothing"
        );
        let answer = match out.replies.pop() {
            Some((rid, GroupResponse::TxnGuard(r))) if rid == id => r,
            other => panic!("TxnGuard answered {other:?}"),
        };
        self.trace(|| format!("p{s} txn guard for pid={pid}: {answer:?}"));
        answer
    }

    // ---- the network ----

    fn txn_send(&mut self, c: usize, call: TxnCall) -> u64 {
        let corr = self.next_corr;
        self.next_corr += 1;
        let deadline = self.now + self.tclients[c].request_timeout;
        self.tclients[c].outstanding = Some((corr, deadline, call.clone()));
        self.txn_wake_at(c, deadline);
        if !self.broker_up {
            self.stats.dropped += 1;
            return corr;
        }
        let msg = TxnMsg {
            client: c,
            corr,
            incarnation: self.incarnation,
            call,
        };
        for delay in self.network_delays() {
            let at = self.now + delay;
            self.push(at, Ev::TxnToBroker(Box::new(msg.clone())));
        }
        corr
    }

    pub(super) fn txn_send_reply(&mut self, client: usize, corr: u64, reply: TxnReply) {
        for delay in self.network_delays() {
            let at = self.now + delay;
            self.push(
                at,
                Ev::TxnToClient {
                    client,
                    corr,
                    reply: Box::new(reply.clone()),
                },
            );
        }
    }

    // ---- the clients ----

    fn txn_backoff(&mut self, c: usize) {
        self.tclients[c].next_at = self.now + self.rng.range(20, 200);
        let at = self.tclients[c].next_at;
        self.txn_wake_at(c, at);
    }

    /// A fenced or crashed producer: a new instance starts later with InitProducerId.
    fn txn_restart_later(&mut self, c: usize, min: i64, max: i64) {
        let at = self.now + self.rng.range(min, max);
        let tc = &mut self.tclients[c];
        tc.alive = false;
        tc.outstanding = None;
        tc.restart_at = Some(at);
        tc.pid = -1;
        tc.epoch = -1;
        tc.step = TStep::Init;
        tc.abortable = false;
        self.txn_wake_at(c, at);
    }

    pub(super) fn txn_client_wake(&mut self, c: usize) {
        if self.tclients[c].wake_at != Some(self.now) {
            return;
        }
        self.tclients[c].wake_at = None;
        if !self.tclients[c].alive {
            if self.tclients[c].restart_at.is_some_and(|r| r <= self.now) {
                self.tclients[c].alive = true;
                self.tclients[c].restart_at = None;
                self.tclients[c].next_at = self.now;
            } else {
                if let Some(r) = self.tclients[c].restart_at {
                    self.txn_wake_at(c, r);
                }
                return;
            }
        }
        if !self.settling && self.rng.chance(self.p.client_crash_p * 2.0) {
            self.stats.client_crashes += 1;
            self.trace(|| format!("txn client {c} crashes"));
            return self.txn_restart_later(c, 100, 15_000);
        }
        if let Some((_, deadline, call)) = self.tclients[c].outstanding.clone() {
            if self.now < deadline {
                return self.txn_wake_at(c, deadline);
            }
            // Timed out: the same request again on a new connection (the old one may still be
            // processed: a zombie request).
            self.txn_send(c, call);
            return;
        }
        if self.now < self.tclients[c].next_at {
            let at = self.tclients[c].next_at;
            return self.txn_wake_at(c, at);
        }
        let tc = self.tclients[c].clone();
        match tc.step {
            TStep::Init => {
                let req = TxnRequest::InitProducerId {
                    transactional_id: tc.tid.clone(),
                    timeout_ms: tc.timeout_ms,
                    expected: None,
                    fresh_producer_id: -1,
                };
                self.txn_send(c, TxnCall::Coord(req));
            }
            TStep::Idle => {
                if self.rng.chance(0.3) {
                    let require_stable = self.rng.chance(0.5);
                    self.tclients[c].step = TStep::Fetch { require_stable };
                } else if !self.settling && tc.tv >= 2 {
                    // No AddOffsetsToTxn in v2: the commit adds the partition.
                    let n = 1 + self.rng.below(2) as u32;
                    let tc = &mut self.tclients[c];
                    tc.step = TStep::Commit;
                    tc.commits_left = n;
                    tc.abortable = false;
                } else if !self.settling {
                    self.tclients[c].step = TStep::Add;
                } else {
                    // Settling: no new transactions; look again later.
                    self.tclients[c].next_at = self.now + 5000;
                    let at = self.tclients[c].next_at;
                    return self.txn_wake_at(c, at);
                }
                self.txn_client_wake_now(c);
            }
            TStep::Add => {
                let s = self.groups[tc.group].partition as i32;
                let req = TxnRequest::AddPartitions {
                    transactional_id: tc.tid.clone(),
                    producer_id: tc.pid,
                    producer_epoch: tc.epoch,
                    partitions: vec![(OFFSETS_TOPIC.to_string(), s)],
                    verify_only: false,
                    client_tv: 0,
                };
                self.txn_send(c, TxnCall::Coord(req));
            }
            TStep::Commit => {
                let req = self.txn_offsets_request(c);
                let group = tc.group;
                self.txn_send(
                    c,
                    TxnCall::OffsetCommit {
                        group,
                        req,
                        guard: TxnGuard::NONE,
                    },
                );
            }
            TStep::End { commit } => {
                let req = TxnRequest::EndTxn {
                    transactional_id: tc.tid.clone(),
                    producer_id: tc.pid,
                    producer_epoch: tc.epoch,
                    commit,
                    client_tv: tc.tv,
                    fresh_producer_id: None,
                };
                self.txn_send(c, TxnCall::Coord(req));
            }
            TStep::Fetch { require_stable } => {
                let parts = self.txn_pick_partitions(tc.group, 4);
                let group = tc.group;
                self.txn_send(
                    c,
                    TxnCall::Fetch {
                        group,
                        require_stable,
                        parts,
                    },
                );
            }
        }
    }

    fn txn_client_wake_now(&mut self, c: usize) {
        self.tclients[c].wake_at = Some(self.now);
        self.txn_client_wake(c);
    }

    /// 1..=max distinct partitions of the group's topics.
    fn txn_pick_partitions(&mut self, group: usize, max: u64) -> Vec<(String, i32)> {
        let topics = self.groups[group].topics.clone();
        let n = 1 + self.rng.below(max);
        let mut out = BTreeSet::new();
        for _ in 0..n {
            let t = self.rng.pick(&topics).clone();
            let count = self.topics.get(&t).map_or(1, |x| x.partitions);
            let p = self.rng.below(count as u64) as i32;
            out.insert((t, p));
        }
        out.into_iter().collect()
    }

    /// A TxnOffsetCommit with a current member's id and generation / member epoch (as
    /// `sendOffsetsToTransaction(offsets, consumer.groupMetadata())` sends them), now and then
    /// a stale one, or none (a producer without a consumer).
    fn txn_offsets_request(&mut self, c: usize) -> TxnOffsetCommitRequest {
        let g = self.tclients[c].group;
        let mut members: Vec<(String, i32, Option<String>)> = Vec::new();
        for &m in &self.groups[g].clients {
            let cl = &self.clients[m];
            if cl.phase != super::clients::Phase::Active {
                continue;
            }
            match &cl.proto {
                super::clients::Proto::Classic(x) if x.state == super::clients::CState::Stable => {
                    members.push((x.member_id.clone(), x.generation, x.instance_id.clone()))
                }
                super::clients::Proto::Consumer(x) if x.epoch > 0 => {
                    members.push((x.member_id.clone(), x.epoch, None))
                }
                _ => {}
            }
        }
        let (member, generation, instance) = if members.is_empty() || self.rng.chance(0.05) {
            (String::new(), -1, None)
        } else {
            let (m, gen, inst) = self.rng.pick(&members).clone();
            if self.rng.chance(0.1) {
                (m, gen - 1, inst)
            } else if self.rng.chance(0.05) {
                ("gone-member".to_string(), gen, None)
            } else {
                (m, gen, inst)
            }
        };
        let parts = self.txn_pick_partitions(g, 3);
        let mut topics: BTreeMap<String, Vec<TxnOffsetCommitRequestPartition>> = BTreeMap::new();
        for (t, p) in parts {
            let offset = self.next_offset;
            self.next_offset += 1;
            topics.entry(t).or_default().push(
                TxnOffsetCommitRequestPartition::default()
                    .with_partition_index(p)
                    .with_committed_offset(offset)
                    .with_committed_metadata(Some(sb(&format!("t{c}")))),
            );
        }
        let tc = &self.tclients[c];
        TxnOffsetCommitRequest::default()
            .with_transactional_id(TransactionalId(sb(&tc.tid)))
            .with_group_id(GroupId(sb(&self.groups[g].name)))
            .with_producer_id(ProducerId(tc.pid))
            .with_producer_epoch(tc.epoch)
            .with_generation_id(generation)
            .with_member_id(sb(&member))
            .with_group_instance_id(instance.as_deref().map(sb))
            .with_topics(
                topics
                    .into_iter()
                    .map(|(t, ps)| {
                        TxnOffsetCommitRequestTopic::default()
                            .with_name(TopicName(sb(&t)))
                            .with_partitions(ps)
                    })
                    .collect(),
            )
    }

    /// An answer reaches a transactional client.
    pub(super) fn txn_client_reply(&mut self, c: usize, corr: u64, reply: TxnReply) {
        let Some((expected, _, _)) = &self.tclients[c].outstanding else {
            return;
        };
        if *expected != corr || !self.tclients[c].alive {
            return;
        }
        self.tclients[c].outstanding = None;
        let step = self.tclients[c].step;
        use ResponseError as E;
        let is = |code: i16, e: E| code == e.code();
        let retriable = |code: i16| {
            code == code::CONCURRENT_TRANSACTIONS
                || code == code::NOT_COORDINATOR
                || is(code, E::CoordinatorNotAvailable)
                || is(code, E::CoordinatorLoadInProgress)
        };
        match (step, reply) {
            (_, TxnReply::Coord(Err(_))) | (_, TxnReply::Group(Reply::Err(_))) => {
                self.txn_backoff(c)
            }
            (
                TStep::Init,
                TxnReply::Coord(Ok(TxnResponse::InitProducerId {
                    error,
                    producer_id,
                    producer_epoch,
                })),
            ) => {
                if error == 0 {
                    let tc = &mut self.tclients[c];
                    tc.pid = producer_id;
                    tc.epoch = producer_epoch;
                    tc.step = TStep::Idle;
                    tc.next_at = self.now + self.rng.range(0, 500);
                    let at = self.tclients[c].next_at;
                    self.txn_wake_at(c, at);
                } else {
                    self.txn_backoff(c);
                }
            }
            (TStep::Add, TxnReply::Coord(Ok(TxnResponse::AddPartitions(codes)))) => {
                let code = codes.iter().copied().find(|x| *x != 0).unwrap_or(0);
                if code == 0 {
                    let n = 1 + self.rng.below(2) as u32;
                    let tc = &mut self.tclients[c];
                    tc.step = TStep::Commit;
                    tc.commits_left = n;
                    tc.abortable = false;
                    self.txn_client_wake_now(c);
                } else if retriable(code) {
                    self.txn_backoff(c);
                } else {
                    self.stats.fatal_errors += 1;
                    self.txn_restart_later(c, 10, 2000);
                }
            }
            (TStep::Commit, TxnReply::Group(Reply::Resp(GroupResponse::TxnOffsetCommit(r)))) => {
                let code = r
                    .topics
                    .iter()
                    .flat_map(|t| t.partitions.iter().map(|p| p.error_code))
                    .find(|x| *x != 0)
                    .unwrap_or(0);
                if code == 0 {
                    self.stats.txn_offset_commits += 1;
                    self.tclients[c].commits_left -= 1;
                    if self.tclients[c].commits_left == 0 {
                        let commit = self.rng.chance(0.7);
                        self.tclients[c].step = TStep::End { commit };
                    }
                    self.txn_client_wake_now(c);
                } else if retriable(code) {
                    self.txn_backoff(c);
                } else if is(code, E::InvalidProducerEpoch) || is(code, E::ProducerFenced) {
                    self.stats.fatal_errors += 1;
                    self.txn_restart_later(c, 10, 2000);
                } else {
                    // Abortable (ILLEGAL_GENERATION, UNKNOWN_MEMBER_ID, INVALID_TXN_STATE...).
                    self.tclients[c].abortable = true;
                    self.tclients[c].step = TStep::End { commit: false };
                    self.txn_client_wake_now(c);
                }
            }
            (
                TStep::End { .. },
                TxnReply::Coord(Ok(TxnResponse::EndTxn {
                    error,
                    producer_id,
                    producer_epoch,
                })),
            ) => {
                if error == 0 {
                    let tc = &mut self.tclients[c];
                    if tc.tv >= 2 {
                        // v2: the next transaction runs on the bumped epoch (or new id).
                        tc.pid = producer_id;
                        tc.epoch = producer_epoch;
                    }
                    tc.step = TStep::Idle;
                    tc.next_at = self.now + self.rng.range(0, 1000);
                    let at = self.tclients[c].next_at;
                    self.txn_wake_at(c, at);
                } else if retriable(error) {
                    self.txn_backoff(c);
                } else {
                    self.stats.fatal_errors += 1;
                    self.txn_restart_later(c, 10, 2000);
                }
            }
            (TStep::Fetch { .. }, TxnReply::Group(Reply::Resp(GroupResponse::OffsetFetch(f)))) => {
                // What a consumer would resume from: never an offset of a transaction that
                // did not commit (checked by the oracle here, on the client's side).
                let seen: Vec<i64> = f
                    .partitions
                    .iter()
                    .filter(|x| x.5 == 0 && x.2 >= 0)
                    .map(|x| x.2)
                    .collect();
                self.oracle_txn_observed(c, &seen);
                let tc = &mut self.tclients[c];
                tc.step = TStep::Idle;
                tc.next_at = self.now + self.rng.range(0, 1000);
                let at = self.tclients[c].next_at;
                self.txn_wake_at(c, at);
            }
            (_, other) => self.fail(format!(
                "transactional client {c} in {step:?} got an unexpected answer {other:?}"
            )),
        }
    }
}
