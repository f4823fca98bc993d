//! The `__transaction_state` partitions a shard owns: each one's transaction coordinator
//! (`coordinator::txn::TxnCoordinator`, pure), its log, its writer, and the markers it sends.
//!
//! Partition `p` lives on shard `p % shards` (as `__consumer_offsets` partitions do) and is
//! touched by no other thread; requests reach it through
//! [`crate::runtime::router::Router::txn`]. A partition opens on first use, or at start-up when
//! its directory exists (so transactions caught mid-commit by a restart get their markers).
//!
//! Durability: the records a request produces are written by the partition's writer task (one
//! write and one fdatasync for everything queued meanwhile), and the reply leaves only once every
//! record produced before it is durable, so no answer reports a state a crash could take back.
//! A failed write fails the waiting requests with NOT_COORDINATOR (Kafka's answer to a failed
//! coordinator append), cuts the log back to what was durable and reloads the coordinator.
//!
//! Markers: a transaction's end (EndTxn, a fenced producer, a timeout) writes its prepare
//! record; once that is durable the partition sends a marker to each partition of the
//! transaction — a data partition's shard (`DataOp::WriteMarker`), or a group coordinator's
//! `__consumer_offsets` partition (`GroupRequest::TxnMarker`) — retrying until each is durable
//! (a deleted topic's partition counts as done), then writes the complete record
//! (`TransactionMarkerChannelManager` in Kafka).

use crate::broker::Broker;
use crate::clock::wall_clock_ms;
use crate::data::{DataOp, DataReply};
use crate::group::{GroupRequest, GroupResponse, RequestContext};
use crate::oneshot::{Notify, OneShot};
use crate::runtime::partition::{PartitionOp, PartitionReply};
use crate::runtime::router::Router;
use coordinator::txn::{
    code, MarkerJob, TxnCoordinator, TxnOutput, TxnRecord, TxnRequest, TxnResponse,
};
use std::cell::{Cell, RefCell};
use std::future::Future;
use std::path::PathBuf;
use std::pin::Pin;
use std::rc::{Rc, Weak};
use std::sync::Arc;
use std::time::Duration;
use storage::io::GlommioDir;
use storage::log::{LogConfig, PartitionLog};
use wire::records::txn::TransactionLogValue;

/// The name of the topic, and the prefix of its partition directories.
pub const TXN_TOPIC: &str = "__transaction_state";

/// The group coordinator's topic: a transaction's offsets partition is one of its partitions.
pub const OFFSETS_TOPIC: &str = "__consumer_offsets";

/// Records a partition may hold produced and not yet durable before new requests wait: a
/// transaction record is ~100 bytes, so this is far above a steady load.
const MAX_PENDING_RECORDS: usize = 16_384;

struct TxnPartition {
    partition: i32,
    core: RefCell<TxnCoordinator>,
    /// `None` without a data directory (in-process tests): records are durable at once.
    log: RefCell<Option<PartitionLog<GlommioDir>>>,
    dir: Option<GlommioDir>,
    /// Records produced and not yet handed to the writer.
    pending: RefCell<Vec<TxnRecord>>,
    /// Records produced / made durable since the partition opened (or last reloaded).
    produced: Cell<u64>,
    durable: Cell<u64>,
    /// Failed writes so far: a waiter that sees it change gets NOT_COORDINATOR.
    failures: Cell<u64>,
    /// Woken when `durable` moves or a write fails.
    changed: Notify,
    /// Requests waiting for their reply, by the id the coordinator knows them by. Bounded:
    /// a request is here while it runs, waits for durability, or waits for its id's markers
    /// (at most `coordinator::txn::MAX_WAITING_PER_ID` per id, each for a bounded time).
    waiters: RefCell<hashbrown::HashMap<u64, Rc<OneShot<Result<TxnResponse, i16>>>>>,
    next_rid: Cell<u64>,
    /// Wakes the writer.
    kick: Notify,
    closed: Cell<bool>,
}

enum Slot {
    Opening(Rc<Notify>),
    Ready(Rc<TxnPartition>),
}

/// The `__transaction_state` partitions of one shard.
pub struct TxnTable {
    broker: Arc<Broker>,
    shard: usize,
    shards: usize,
    parts: RefCell<hashbrown::HashMap<i32, Slot>>,
    /// Set once the shard's router exists (markers go through it).
    router: RefCell<Weak<Router>>,
}

fn log_config(broker: &Broker) -> LogConfig {
    LogConfig {
        segment_bytes: broker.config.transaction_state_log_segment_bytes.max(1) as u64,
        ..LogConfig::default()
    }
}

impl TxnTable {
    pub fn new(broker: Arc<Broker>, shard: usize, shards: usize) -> Rc<Self> {
        Rc::new(Self {
            broker,
            shard,
            shards,
            parts: RefCell::default(),
            router: RefCell::new(Weak::new()),
        })
    }

    pub fn set_router(&self, router: &Rc<Router>) {
        *self.router.borrow_mut() = Rc::downgrade(router);
    }

    fn dir_of(&self, partition: i32) -> Option<PathBuf> {
        self.broker
            .data_dir
            .as_ref()
            .map(|d| d.join(format!("{TXN_TOPIC}-{partition}")))
    }

    /// Open the partitions of this shard that have a directory already (start-up): the
    /// transactions a restart caught between prepare and complete get their markers now.
    pub async fn load_existing(self: &Rc<Self>) {
        let n = self.broker.config.transaction_state_log_num_partitions;
        for p in (0..n).filter(|p| *p as usize % self.shards == self.shard) {
            if self.dir_of(p).is_some_and(|d| d.is_dir()) {
                if let Err(code) = self.partition(p).await {
                    tracing::error!(partition = p, code, "could not load {TXN_TOPIC}-{p}");
                }
            }
        }
    }

    /// Run one request on `partition`: its coordinator's answer, or the error code the request
    /// gets when the partition cannot answer (its write failed, its log could not open).
    pub fn execute(
        self: &Rc<Self>,
        partition: i32,
        req: TxnRequest,
    ) -> Pin<Box<dyn Future<Output = Result<TxnResponse, i16>>>> {
        let me = self.clone();
        Box::pin(async move {
            // ListTransactions must not create partitions that do not exist yet.
            if matches!(req, TxnRequest::List { .. } | TxnRequest::Describe { .. })
                && !me.parts.borrow().contains_key(&partition)
                && me.dir_of(partition).is_none_or(|d| !d.is_dir())
            {
                return Ok(match req {
                    TxnRequest::List { .. } => TxnResponse::List(Vec::new()),
                    _ => TxnResponse::Describe(Err(code::TRANSACTIONAL_ID_NOT_FOUND)),
                });
            }
            let part = match me.partition(partition).await {
                Ok(p) => p,
                Err(code) => return Err(code),
            };
            me.run(&part, req).await
        })
    }

    /// Run one request on an open partition and wait for what it depends on to be durable.
    async fn run(
        self: &Rc<Self>,
        part: &Rc<TxnPartition>,
        req: TxnRequest,
    ) -> Result<TxnResponse, i16> {
        // Bounded memory: past the bound, wait for the writer to take what is queued.
        while part.pending.borrow().len() >= MAX_PENDING_RECORDS {
            let failures = part.failures.get();
            part.changed.register().wait().await;
            if part.failures.get() != failures {
                return Err(code::NOT_COORDINATOR);
            }
        }
        let rid = part.next_rid.get();
        part.next_rid.set(rid.wrapping_add(1));
        let answer = OneShot::new();
        part.waiters.borrow_mut().insert(rid, answer.clone());
        let mut out = TxnOutput::default();
        {
            // The level may have changed since the last request (UpdateFeatures).
            let mut core = part.core.borrow_mut();
            core.set_transaction_version(self.broker.features.transaction_version());
            core.handle(rid, req, wall_clock_ms(), &mut out);
        }
        self.submit(part, out);
        answer.wait().await
    }

    /// Queue the records of `out` for the writer and start its marker jobs once those records
    /// are durable. Returns the sequence a reply must wait for.
    fn submit(self: &Rc<Self>, part: &Rc<TxnPartition>, out: TxnOutput) -> u64 {
        if !out.records.is_empty() {
            part.produced
                .set(part.produced.get() + out.records.len() as u64);
            part.pending.borrow_mut().extend(out.records);
            part.kick.notify_all();
        }
        let needs = part.produced.get();
        // Replies leave once every record produced before them is durable: at once when it
        // already is (a verification, a describe), else from a task that waits for it.
        if !out.replies.is_empty() {
            if part.durable.get() >= needs {
                answer(part, out.replies.into_iter().map(|(rid, r)| (rid, Ok(r))));
            } else {
                let (part, replies) = (part.clone(), out.replies);
                let failures = part.failures.get();
                glommio::spawn_local(async move {
                    let result = wait_durable(&part, needs, failures).await;
                    answer(
                        &part,
                        replies
                            .into_iter()
                            .map(|(rid, r)| (rid, result.map(|()| r))),
                    );
                })
                .detach();
            }
        }
        for job in out.markers {
            let (me, part) = (self.clone(), part.clone());
            let failures = part.failures.get();
            glommio::spawn_local(async move {
                if wait_durable(&part, needs, failures).await.is_ok() {
                    me.send_markers(&part, job).await;
                }
            })
            .detach();
        }
        needs
    }

    /// Write the job's markers (retrying each until it is durable), then complete the
    /// transaction. A reload in between drops the job: the reloaded coordinator starts it anew.
    async fn send_markers(self: &Rc<Self>, part: &Rc<TxnPartition>, job: MarkerJob) {
        let failures = part.failures.get();
        let tasks: Vec<_> = job
            .partitions
            .iter()
            .map(|(topic, p)| {
                let (me, topic, p, job) = (self.clone(), topic.clone(), *p, job.clone());
                glommio::spawn_local(async move { me.write_marker(&topic, p, &job).await })
            })
            .collect();
        for t in tasks {
            t.await;
        }
        if part.failures.get() != failures || part.closed.get() {
            return;
        }
        let mut out = TxnOutput::default();
        let mut core = part.core.borrow_mut();
        core.set_transaction_version(self.broker.features.transaction_version());
        core.markers_written(&job, wall_clock_ms(), &mut out);
        drop(core);
        self.submit(part, out);
    }

    /// One marker, retried with backoff until it is durable or its partition is gone.
    async fn write_marker(&self, topic: &str, partition: i32, job: &MarkerJob) {
        let mut backoff = Duration::from_millis(20);
        loop {
            let Some(router) = self.router.borrow().upgrade() else {
                return; // shutting down
            };
            let result = if topic == OFFSETS_TOPIC {
                let ctx = Arc::new(RequestContext {
                    client_id: "transaction-coordinator".into(),
                    client_host: String::new(),
                    api_version: 0,
                    topics: self.broker.topics.snapshot(),
                    group_configs: self.broker.group_configs.snapshot(),
                    topic_filter: None, // the broker's own markers: no principal
                });
                let req = GroupRequest::TxnMarker {
                    producer_id: job.producer_id,
                    producer_epoch: job.producer_epoch,
                    commit: job.commit,
                    coordinator_epoch: 0,
                };
                match router
                    .partition(partition, PartitionOp::Group { ctx, req })
                    .await
                {
                    PartitionReply::Group(GroupResponse::TxnMarker(c)) => c,
                    PartitionReply::Loading => {
                        kafka_protocol::ResponseError::CoordinatorLoadInProgress.code()
                    }
                    _ => code::NOT_COORDINATOR,
                }
            } else {
                let Some(t) = self.broker.topics.snapshot().get(topic).cloned() else {
                    return; // the topic was deleted: its partitions need no marker
                };
                if partition < 0 || partition >= t.partitions {
                    return;
                }
                let owner = crate::data::owner_shard(topic, partition, router.shards());
                let op = DataOp::WriteMarker {
                    topic: t,
                    partition,
                    producer_id: job.producer_id,
                    producer_epoch: job.producer_epoch,
                    commit: job.commit,
                    coordinator_epoch: 0,
                };
                match router.data(owner, op).await {
                    Some(DataReply::Marker(c)) => c,
                    _ => code::NOT_COORDINATOR,
                }
            };
            if result == 0
                || result == kafka_protocol::ResponseError::UnknownTopicOrPartition.code()
            {
                return;
            }
            tracing::warn!(
                topic,
                partition,
                code = result,
                transactional_id = %job.transactional_id,
                "writing a transaction marker failed; retrying"
            );
            glommio::timer::sleep(backoff).await;
            backoff = (backoff * 2).min(Duration::from_secs(5));
        }
    }

    /// The open partition, opening (and loading) it as needed.
    async fn partition(self: &Rc<Self>, partition: i32) -> Result<Rc<TxnPartition>, i16> {
        loop {
            let wait = match self.parts.borrow().get(&partition) {
                Some(Slot::Ready(p)) => return Ok(p.clone()),
                Some(Slot::Opening(n)) => Some(n.register()),
                None => None,
            };
            match wait {
                Some(w) => w.wait().await,
                None => break,
            }
        }
        let opening = Rc::new(Notify::default());
        self.parts
            .borrow_mut()
            .insert(partition, Slot::Opening(opening.clone()));
        let result = self.open(partition).await;
        let out = match result {
            Ok(p) => {
                self.parts
                    .borrow_mut()
                    .insert(partition, Slot::Ready(p.clone()));
                Ok(p)
            }
            Err(e) => {
                tracing::error!(partition, error = %e, "opening {TXN_TOPIC}-{partition} failed");
                self.parts.borrow_mut().remove(&partition);
                Err(code::NOT_COORDINATOR)
            }
        };
        opening.notify_all();
        out
    }

    async fn open(self: &Rc<Self>, partition: i32) -> std::io::Result<Rc<TxnPartition>> {
        let started = std::time::Instant::now();
        let mut core = TxnCoordinator::new(crate::config::txn_config(&self.broker.config));
        let (log, dir, records) = match self.dir_of(partition) {
            None => (None, None, 0),
            Some(path) => {
                let dir = GlommioDir::new(&path)?;
                let (log, records) = load(&dir, &log_config(&self.broker), &mut core).await?;
                (Some(log), Some(dir), records)
            }
        };
        let jobs = core.on_loaded(wall_clock_ms());
        tracing::info!(
            shard = self.shard,
            records,
            transactional_ids = core.len(),
            unfinished = jobs.len(),
            millis = started.elapsed().as_millis() as u64,
            "loaded {TXN_TOPIC}-{partition}"
        );
        let part = Rc::new(TxnPartition {
            partition,
            core: RefCell::new(core),
            log: RefCell::new(log),
            dir,
            pending: RefCell::default(),
            produced: Cell::new(0),
            durable: Cell::new(0),
            failures: Cell::new(0),
            changed: Notify::default(),
            waiters: RefCell::default(),
            next_rid: Cell::new(0),
            kick: Notify::default(),
            closed: Cell::new(false),
        });
        glommio::spawn_local(writer(self.clone(), Rc::downgrade(&part))).detach();
        self.submit(
            &part,
            TxnOutput {
                markers: jobs,
                ..TxnOutput::default()
            },
        );
        Ok(part)
    }

    /// Timeouts and id expiration of every open partition (the shard's ticker).
    pub fn tick(self: &Rc<Self>) {
        let now = wall_clock_ms();
        let parts: Vec<Rc<TxnPartition>> = self
            .parts
            .borrow()
            .values()
            .filter_map(|s| match s {
                Slot::Ready(p) => Some(p.clone()),
                Slot::Opening(_) => None,
            })
            .collect();
        for p in parts {
            if p.core.borrow().next_deadline() > now {
                continue;
            }
            let mut out = TxnOutput::default();
            let mut core = p.core.borrow_mut();
            core.set_transaction_version(self.broker.features.transaction_version());
            core.tick(now, &mut out);
            drop(core);
            self.submit(&p, out);
        }
    }

    /// Stop every writer (shutdown).
    pub fn close(&self) {
        for s in self.parts.borrow().values() {
            if let Slot::Ready(p) = s {
                p.closed.set(true);
                p.kick.notify_all();
                p.changed.notify_all();
                fail_waiters(p);
            }
        }
    }
}

/// Hand each reply to the request waiting for it (a request whose connection went away is
/// simply gone from the map).
fn answer(part: &TxnPartition, replies: impl Iterator<Item = (u64, Result<TxnResponse, i16>)>) {
    for (rid, r) in replies {
        if let Some(w) = part.waiters.borrow_mut().remove(&rid) {
            w.complete(r);
        }
    }
}

/// Fail every request still waiting on the partition (its coordinator was replaced, or the
/// shard stops): NOT_COORDINATOR, so the client looks the coordinator up again and retries.
fn fail_waiters(part: &TxnPartition) {
    let waiters = std::mem::take(&mut *part.waiters.borrow_mut());
    for (_, w) in waiters {
        w.complete(Err(code::NOT_COORDINATOR));
    }
}

/// Wait until every record up to `needs` is durable; an error if a write failed meanwhile.
async fn wait_durable(part: &TxnPartition, needs: u64, failures: u64) -> Result<(), i16> {
    loop {
        if part.failures.get() != failures || part.closed.get() {
            return Err(code::NOT_COORDINATOR);
        }
        if part.durable.get() >= needs {
            return Ok(());
        }
        part.changed.register().wait().await;
    }
}

/// Replay a partition's log into `core`. Returns the log and the records replayed.
async fn load(
    dir: &GlommioDir,
    config: &LogConfig,
    core: &mut TxnCoordinator,
) -> std::io::Result<(PartitionLog<GlommioDir>, u64)> {
    let mut n = 0u64;
    let mut skipped = 0u64;
    let (log, report) = PartitionLog::open(dir.clone(), config.clone(), |_, _, k, v| {
        let Some(id) = k.and_then(|k| wire::records::txn::decode_key(k).ok()) else {
            skipped += 1;
            return;
        };
        let value = match v {
            None => None,
            Some(v) => match TransactionLogValue::decode(v) {
                Ok(v) => Some(v),
                Err(_) => {
                    skipped += 1;
                    return;
                }
            },
        };
        core.replay(&(id, value));
        n += 1;
    })
    .await?;
    if let Some((segment, pos, reason)) = &report.truncated {
        tracing::warn!(segment = %segment, position = pos, %reason, "truncated a torn or corrupt {TXN_TOPIC} tail");
    }
    if skipped > 0 {
        tracing::warn!(skipped, "skipped {TXN_TOPIC} records that do not decode");
    }
    Ok((log, n))
}

fn encode(records: &[TxnRecord], value_version: i16) -> Vec<(Vec<u8>, Option<Vec<u8>>)> {
    records
        .iter()
        .map(|(id, v)| {
            // Ids and partition lists come from requests that decoded them, so they fit the
            // record's int16-length strings; a failure here is a bug, not bad input.
            let key = wire::records::txn::encode_key(id).expect("a transactional id fits its key");
            let value = v.as_ref().map(|v| {
                v.encode(value_version)
                    .expect("a transaction value encodes")
            });
            (key, value)
        })
        .collect()
}

/// A partition's writer: everything queued since the last write goes in one batch with one
/// fdatasync; then the replies waiting on it are released. After a segment roll it compacts the
/// closed segments (`storage::compact`, as Kafka's cleaner compacts `__transaction_state`: the
/// last record of each transactional id stays) one slice between writes, so the log stays about
/// the size of the live ids plus the active segment.
async fn writer(table: Rc<TxnTable>, part: Weak<TxnPartition>) {
    let mut compaction: Option<storage::compact::Compaction> = None;
    let mut rolls_seen = 0u64;
    let compact_config = storage::compact::CompactConfig {
        delete_retention_ms: table.broker.config.delete_retention_ms,
        slice_bytes: 256 * 1024,
    };
    loop {
        let Some(p) = part.upgrade() else { return };
        if p.closed.get() {
            return;
        }
        if p.pending.borrow().is_empty() && compaction.is_none() {
            let w = p.kick.register();
            drop(p);
            w.wait().await;
            continue;
        }
        if !p.pending.borrow().is_empty() {
            let records = std::mem::take(&mut *p.pending.borrow_mut());
            let n = records.len() as u64;
            // The log is taken out while the write runs (no borrow across the await); what was
            // durable before it is where a failed write is cut back to.
            let mut durable_end = 0;
            let taken = p.log.borrow_mut().take();
            let written = match taken {
                None => Ok(()),
                Some(mut log) => {
                    durable_end = log.next_offset();
                    let version = coordinator::txn::log_value_version(
                        table.broker.features.transaction_version(),
                    );
                    let pairs = encode(&records, version);
                    // Base sequence -1, as Kafka's transaction coordinator writes its batches.
                    let r = log
                        .append_pairs_as(
                            storage::batch::BatchProducer::NO_SEQUENCE,
                            &pairs,
                            wall_clock_ms(),
                        )
                        .await;
                    *p.log.borrow_mut() = Some(log);
                    r.map(|_| ())
                }
            };
            match written {
                Ok(()) => {
                    p.durable.set(p.durable.get() + n);
                    p.changed.notify_all();
                }
                Err(e) => {
                    tracing::error!(partition = p.partition, error = %e, "{TXN_TOPIC} write failed; reloading the partition");
                    p.failures.set(p.failures.get() + 1);
                    p.pending.borrow_mut().clear();
                    p.changed.notify_all();
                    // A pass over the old log is void once it is reloaded.
                    compaction = None;
                    rolls_seen = 0;
                    reload(&table, &p, durable_end).await;
                    continue;
                }
            }
        }
        let taken = p.log.borrow_mut().take();
        let Some(mut log) = taken else { continue };
        if compaction.is_none() && log.rolls() != rolls_seen {
            rolls_seen = log.rolls();
            compaction = log.start_compaction(compact_config.clone(), wall_clock_ms(), None);
        }
        if let Some(c) = compaction.as_mut() {
            match log.compact_slice(c).await {
                Ok(false) => {}
                Ok(true) => {
                    tracing::info!(partition = p.partition, stats = ?c.stats, "compacted {TXN_TOPIC}-{}", p.partition);
                    compaction = None;
                }
                Err(e) => {
                    tracing::warn!(partition = p.partition, error = %e, "{TXN_TOPIC} compaction failed; the log is unchanged");
                    compaction = None;
                }
            }
        }
        *p.log.borrow_mut() = Some(log);
    }
}

/// After a failed write: cut the log back to what was durable, replay it into a new
/// coordinator, and restart its unfinished marker jobs.
async fn reload(table: &Rc<TxnTable>, p: &Rc<TxnPartition>, durable_end: u64) {
    let Some(dir) = &p.dir else { return };
    let config = log_config(&table.broker);
    let mut backoff = Duration::from_millis(50);
    loop {
        if p.closed.get() {
            return;
        }
        // A failed append's batch may sit in the file without its fdatasync: cut it first.
        let attempt = async {
            storage::log::discard_unacknowledged(dir, &config, durable_end).await?;
            let mut core = TxnCoordinator::new(crate::config::txn_config(&table.broker.config));
            let (log, _) = load(dir, &config, &mut core).await?;
            std::io::Result::Ok((core, log))
        };
        match attempt.await {
            Ok((mut core, log)) => {
                let jobs = core.on_loaded(wall_clock_ms());
                *p.core.borrow_mut() = core;
                // Requests the old coordinator held (waiting for markers) are gone with it.
                fail_waiters(p);
                *p.log.borrow_mut() = Some(log);
                p.produced.set(p.durable.get());
                table.submit(
                    p,
                    TxnOutput {
                        markers: jobs,
                        ..TxnOutput::default()
                    },
                );
                return;
            }
            Err(e) => {
                tracing::error!(partition = p.partition, error = %e, "{TXN_TOPIC} reload failed; retrying");
                glommio::timer::sleep(backoff).await;
                backoff = (backoff * 2).min(Duration::from_secs(5));
            }
        }
    }
}
