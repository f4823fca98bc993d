//! The `__consumer_offsets` partitions a shard owns, and the operations they answer.
//!
//! Each partition's coordinator (`group::Coordinator`) lives on exactly one shard and is only
//! touched there, through [`crate::runtime::router::Router::partition`]. Executing a group request runs the
//! pure state machine with the current time, hands the records it produced to the partition's
//! record sink, and releases the responses that became ready — possibly to requests that were
//! parked earlier (a JoinGroup waits for the join phase). A per-shard ticker fires deadlines.

use crate::clock::wall_clock_ms;
use crate::group::target::AssignmentDone;
use crate::group::{Coordinator, GroupConfig, GroupRequest, GroupResponse, ReqId, RequestContext};
use crate::oneshot::OneShot;
use crate::partition_core::{encode_batch, PartitionCore, Refusal, Released};
use crate::runtime::journal::{Payload, RoundStats, ShardJournal, JOURNAL_DIR};
use crate::snapshot_build::SnapshotBuild;
use std::cell::{Cell, RefCell};
use std::future::Future;
use std::pin::Pin;
use std::rc::{Rc, Weak};
use std::sync::Arc;
use std::time::Instant;
use storage::compact::{CompactConfig, Compaction};
use storage::io::{GlommioDir, LogDir};
use storage::log::discard_unacknowledged;
use storage::log::{LogConfig, PartitionLog};
use wire::records::Record;

/// An operation on one partition, sent to the shard that owns it.
#[derive(Debug)]
pub enum PartitionOp {
    /// Report which shard holds the partition and how many operations it has served.
    Status,
    /// One group's share of a group API request. The context is shared: a connection builds it
    /// once and reuses it for every request of the same version while the topics and group
    /// configs stay the same (`runtime::shard::Shard::request_context`).
    Group {
        ctx: Arc<RequestContext>,
        req: GroupRequest,
    },
    /// A Raft message from a peer node for this partition's replica (a node of a cluster).
    Raft(Vec<u8>),
}

/// A partition operation under way: answered already, waiting for the partition (a parked
/// JoinGroup, a commit waiting for its records to be durable), or running on another shard.
///
/// Most group requests (a heartbeat, anything that changes nothing in a quiet partition) are
/// answered while they run: [`PartitionCall::ready`] hands that answer over with no future
/// allocated, no waiter registered and no task spawned.
pub enum PartitionCall {
    Ready(Option<PartitionReply>),
    Waiting(crate::oneshot::Wait<GroupResponse>),
    Elsewhere(Pin<Box<dyn Future<Output = PartitionReply>>>),
}

impl PartitionCall {
    /// The answer, if it is already there (then the call is done and must not be polled).
    pub fn ready(&mut self) -> Option<PartitionReply> {
        match self {
            PartitionCall::Ready(r) => r.take(),
            _ => None,
        }
    }
}

impl Future for PartitionCall {
    type Output = PartitionReply;
    fn poll(
        self: Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<PartitionReply> {
        match self.get_mut() {
            PartitionCall::Ready(r) => {
                std::task::Poll::Ready(r.take().expect("a ready call is polled once"))
            }
            PartitionCall::Waiting(w) => Pin::new(w).poll(cx).map(PartitionReply::Group),
            PartitionCall::Elsewhere(f) => f.as_mut().poll(cx),
        }
    }
}

#[derive(Debug, Clone, PartialEq)]
pub enum PartitionReply {
    Status {
        partition: i32,
        shard: usize,
        ops_served: u64,
    },
    Group(GroupResponse),
    /// The owning shard is gone (shutting down): callers map this to COORDINATOR_NOT_AVAILABLE.
    Unavailable,
    /// The partition is still loading its log: COORDINATOR_LOAD_IN_PROGRESS.
    Loading,
    /// Another node leads the partition (a node of a cluster): NOT_COORDINATOR, and the client
    /// looks the coordinator up again.
    NotCoordinator,
    /// A Raft message was taken (or refused and counted): nothing to answer.
    Accepted,
}

/// Records kept in memory when the broker runs without a data directory (in-process tests):
/// bounded, oldest dropped first.
pub const IN_MEMORY_MAX_RECORDS: usize = 1 << 16;

/// Bytes a compaction slice reads: about a millisecond of work, so a pass never holds a
/// partition's writes up for longer than that (measured in docs/performance.md).
pub const COMPACTION_SLICE_BYTES: usize = 256 * 1024;

/// Records a snapshot slice captures (at least one whole group): ~0.5 µs each to encode, so a
/// slice stays around a millisecond.
pub const SNAPSHOT_SLICE_RECORDS: usize = 2048;

pub use crate::partition_core::MAX_RECORDS_PER_BATCH;

/// One partition: the sans-IO core (coordinator and durability protocol) and the I/O around it.
/// Parked replies are tagged with the instant they parked, to measure the durability wait.
struct Slot {
    core: PartitionCore<Instant>,
    /// Wakes the partition's log writer; None = memory mode (no data directory).
    doorbell: Option<glommio::channels::local_channel::LocalSender<()>>,
    /// Memory mode: the records "written", bounded.
    memory: std::collections::VecDeque<Record>,
}

impl Slot {
    /// After the core ran: wake the writer, or in memory mode "write" at once — each batch is
    /// durable as soon as it is taken, so the replies it holds are released with it.
    fn after_output(&mut self, ready: &mut Vec<Released<Instant>>) {
        match &self.doorbell {
            Some(doorbell) => {
                if self.core.has_pending() {
                    let _ = doorbell.try_send(()); // full = the writer is already due to look
                }
            }
            None => {
                while let Some(batch) = self.core.take_batch() {
                    for r in batch.records {
                        if self.memory.len() == IN_MEMORY_MAX_RECORDS {
                            self.memory.pop_front();
                        }
                        self.memory.push_back(r);
                    }
                    ready.extend(self.core.batch_durable(batch.upto));
                }
            }
        }
    }
}

/// The partitions one shard owns: `p` such that `p % shards == shard`.
pub struct PartitionTable {
    shard: usize,
    shards: usize,
    config: GroupConfig,
    slots: Vec<RefCell<Slot>>,
    waiters: RefCell<hashbrown::HashMap<ReqId, Rc<OneShot<GroupResponse>>>>,
    next_req: Cell<ReqId>,
    clock: fn() -> i64,
    /// This shard's measurements (requests, durability waits, fsyncs, gauges).
    pub metrics: RefCell<crate::metrics::ShardMetrics>,
    /// Where a loading partition reads the per-group configs, so that the sessions it restarts
    /// run on each group's own timeout (requests bring later changes).
    group_configs: RefCell<Option<GroupConfigsSource>>,
    /// Durable mode: the shard's journal, the one durable point of every partition it owns.
    journal: RefCell<Option<Rc<ShardJournal>>>,
    /// The table itself, for the tasks that hand offloaded assignments back (set by
    /// [`PartitionTable::into_rc`]).
    this: Weak<PartitionTable>,
}

/// The current per-group config overrides (the broker's registry, read lock-free).
pub type GroupConfigsSource = Rc<dyn Fn() -> Arc<coordinator::group::GroupOverridesMap>>;

/// A test failpoint: `RINGLEADER_FAILPOINT_PANIC_ON_DESCRIBE=<group>` makes describing that group
/// panic on the shard that owns it, so that a test can show a shard's panic stopping the whole
/// process (`engine/tests/fail_fast.rs`). Read once; unset in production.
fn failpoint_describe(group: &str) {
    static TARGET: std::sync::OnceLock<Option<String>> = std::sync::OnceLock::new();
    let target =
        TARGET.get_or_init(|| std::env::var("RINGLEADER_FAILPOINT_PANIC_ON_DESCRIBE").ok());
    if target.as_deref() == Some(group) {
        panic!("failpoint: describing group {group}");
    }
}

/// What loading one partition's log found (one log line each).
#[derive(Debug, Clone)]
pub struct LoadReport {
    pub partition: i32,
    pub report: storage::log::RecoveryReport,
    pub skipped_records: u64,
    pub millis: u128,
}

impl PartitionTable {
    pub fn new(shard: usize, shards: usize, partitions: i32, config: GroupConfig) -> Self {
        Self::with_clock(shard, shards, partitions, config, wall_clock_ms)
    }

    pub fn with_clock(
        shard: usize,
        shards: usize,
        partitions: i32,
        config: GroupConfig,
        clock: fn() -> i64,
    ) -> Self {
        let now = clock();
        let slots = (0..partitions.max(0))
            .filter(|p| *p as usize % shards == shard)
            .map(|p| {
                let mut coordinator = Coordinator::new(p, config.clone());
                coordinator.start(now);
                RefCell::new(Slot {
                    core: PartitionCore::new(coordinator),
                    doorbell: None,
                    memory: Default::default(),
                })
            })
            .collect();
        Self {
            shard,
            shards,
            config,
            slots,
            waiters: RefCell::default(),
            next_req: Cell::new(1),
            clock,
            metrics: RefCell::new(crate::metrics::ShardMetrics::default()),
            group_configs: RefCell::new(None),
            journal: RefCell::new(None),
            this: Weak::new(),
        }
    }

    /// The table shared by the shard's tasks. Offloaded assignments need it (a table used
    /// bare, as some tests do, runs them inline).
    pub fn into_rc(mut self) -> Rc<Self> {
        Rc::new_cyclic(|this| {
            self.this = this.clone();
            self
        })
    }

    /// Where loads read the per-group configs (set once by the server).
    pub fn set_group_configs(&self, source: GroupConfigsSource) {
        *self.group_configs.borrow_mut() = Some(source);
    }

    fn group_configs_now(&self) -> Arc<coordinator::group::GroupOverridesMap> {
        self.group_configs
            .borrow()
            .as_ref()
            .map(|f| f())
            .unwrap_or_default()
    }

    /// Durable mode: load every owned partition from `DATA/__consumer_offsets-<p>/` (replaying its
    /// records into the coordinator) and start its log writer. Partitions load one after another
    /// on this shard while the other shards load theirs in parallel. [`Self::begin_loading`]
    /// must have been called.
    pub async fn open_logs(
        self: &Rc<Self>,
        data_dir: &std::path::Path,
        log_config: LogConfig,
    ) -> anyhow::Result<Vec<LoadReport>> {
        self.start_journal(data_dir).await?;
        let mut reports = Vec::new();
        for idx in 0..self.slots.len() {
            let partition = self.slots[idx].borrow().core.partition();
            let dir = GlommioDir::new(data_dir.join(format!("__consumer_offsets-{partition}")))?;
            let started = std::time::Instant::now();
            let (coordinator, log, report, skipped) = load_partition(
                partition,
                &self.config,
                self.group_configs_now(),
                dir.clone(),
                log_config.clone(),
                self.now(),
            )
            .await?;
            let since_snapshot = log
                .next_offset()
                .saturating_sub(storage::snapshot::latest_offset(dir.path()).map_or(0, |o| o + 1));
            let (tx, rx) = glommio::channels::local_channel::new_bounded(1);
            {
                let mut slot = self.slots[idx].borrow_mut();
                slot.core.loaded(coordinator, since_snapshot);
                slot.doorbell = Some(tx);
            }
            glommio::spawn_local(log_writer(
                self.clone(),
                idx,
                log,
                dir,
                log_config.clone(),
                rx,
            ))
            .detach();
            reports.push(LoadReport {
                partition,
                report,
                skipped_records: skipped,
                millis: started.elapsed().as_millis(),
            });
        }
        Ok(reports)
    }

    /// Start this shard's journal in `DATA/__consumer_offsets-journal/`. The server recovered
    /// and removed every journal file before the shards started
    /// ([`crate::runtime::journal`]); a file of this shard still there means that did not happen,
    /// and writing over it could lose what only it holds.
    async fn start_journal(self: &Rc<Self>, data_dir: &std::path::Path) -> anyhow::Result<()> {
        let dir = GlommioDir::new(data_dir.join(JOURNAL_DIR))?;
        let leftover =
            dir.list().await?.into_iter().find(|n| {
                storage::journal::parse_file_name(n).is_some_and(|(s, _)| s == self.shard)
            });
        if let Some(name) = leftover {
            anyhow::bail!(
                "journal file {} was not recovered before shard {} started",
                dir.path().join(name).display(),
                self.shard
            );
        }
        let journal = storage::journal::Journal::create(dir, self.shard, 1).await?;
        let table = Rc::downgrade(self);
        let shard_journal = ShardJournal::start(journal, move |r: RoundStats| {
            if let Some(t) = table.upgrade() {
                let mut m = t.metrics.borrow_mut();
                if r.ok {
                    m.fsyncs += 1;
                    let _ = m.fsync_us.record(r.micros);
                    let _ = m.journal_round_batches.record(r.entries.max(1));
                } else {
                    m.write_failures += 1;
                }
            }
        });
        *self.journal.borrow_mut() = Some(shard_journal);
        Ok(())
    }

    /// A clean stop: once connections are drained, make every segment durable and remove the
    /// journal, so the data directory needs no journal to start again.
    pub async fn close_journal(&self) {
        let journal = self.journal.borrow().clone();
        if let Some(j) = journal {
            if let Err(e) = j.close().await {
                tracing::warn!(shard = self.shard, error = %e, "journal not closed; the next start recovers from it");
            }
        }
    }

    fn journal(&self) -> Rc<ShardJournal> {
        self.journal
            .borrow()
            .clone()
            .expect("durable mode starts the journal before any writer")
    }

    /// Mark every owned partition as loading, before the listener opens: requests arriving
    /// before a partition's log is replayed get COORDINATOR_LOAD_IN_PROGRESS and retry.
    pub fn begin_loading(&self) {
        for s in &self.slots {
            s.borrow_mut().core.begin_loading();
        }
    }

    fn slot_index(&self, partition: i32) -> Option<usize> {
        if partition < 0 || partition as usize % self.shards != self.shard {
            return None;
        }
        let idx = partition as usize / self.shards;
        (idx < self.slots.len()).then_some(idx)
    }

    /// Run `op` on `partition`, which must be owned by this shard.
    pub fn execute(&self, partition: i32, op: PartitionOp) -> PartitionCall {
        let ready = |reply| PartitionCall::Ready(Some(reply));
        let Some(idx) = self.slot_index(partition) else {
            return ready(PartitionReply::Unavailable);
        };
        match op {
            // A single node has no peers; a message from one is dropped.
            PartitionOp::Raft(_) => ready(PartitionReply::Accepted),
            PartitionOp::Status => {
                let ops_served = self.slots[idx].borrow_mut().core.count_op();
                ready(PartitionReply::Status {
                    partition,
                    shard: self.shard,
                    ops_served,
                })
            }
            PartitionOp::Group { ctx, req } => {
                if let GroupRequest::Describe { group } = &req {
                    failpoint_describe(group);
                }
                let mut slot = self.slots[idx].borrow_mut();
                match slot.core.admit() {
                    Ok(()) => {}
                    Err(Refusal::Loading) => return ready(PartitionReply::Loading),
                    Err(Refusal::Unavailable) => return ready(PartitionReply::Unavailable),
                }
                let id = self.next_req.get();
                self.next_req.set(id + 1);
                let now = (self.clock)();
                let mut released = slot.core.handle(id, &ctx, req, now, Instant::now());
                slot.after_output(&mut released);
                drop(slot);
                // This request's own reply, if it may leave now (a heartbeat, a request that
                // changed nothing in a quiet partition): answered without a waiter.
                let mine = released
                    .iter()
                    .position(|r| r.id == id)
                    .map(|i| released.remove(i).response);
                self.complete(released);
                let call = match mine {
                    Some(response) => ready(PartitionReply::Group(response)),
                    None => {
                        // Parked (nothing ran since `handle`: the reply cannot have been released
                        // without this waiter).
                        let waiter = OneShot::new();
                        self.waiters.borrow_mut().insert(id, waiter.clone());
                        PartitionCall::Waiting(waiter.wait())
                    }
                };
                // After the waiter is in place: a bare table (tests) runs the assignments
                // inline, and what they release may be this request's reply.
                self.offload_assignments(idx);
                call
            }
        }
    }

    /// Run the requests that waited for room in partition `idx` (after a durable batch or a
    /// reload) and hand out what they release.
    fn resume(&self, idx: usize) {
        let released = {
            let mut slot = self.slots[idx].borrow_mut();
            if slot.core.deferred_len() == 0 {
                return;
            }
            let mut released = slot.core.resume(self.now());
            slot.after_output(&mut released);
            released
        };
        self.complete(released);
        self.offload_assignments(idx);
    }

    /// Hand released replies to the requests waiting for them.
    fn complete(&self, replies: Vec<Released<Instant>>) {
        if replies.is_empty() {
            return;
        }
        let mut waiters = self.waiters.borrow_mut();
        for r in replies {
            let waiter = waiters.remove(&r.id);
            debug_assert!(waiter.is_some(), "a released reply has its waiter");
            if let Some(w) = waiter {
                w.complete(r.response);
            }
        }
    }

    /// Fire every due deadline of every partition.
    pub fn tick(&self, now: i64) {
        for idx in 0..self.slots.len() {
            let ready = {
                let mut slot = self.slots[idx].borrow_mut();
                if slot.core.next_deadline().is_none_or(|d| d > now) {
                    continue;
                }
                let mut ready = slot.core.tick(now, Instant::now());
                slot.after_output(&mut ready);
                ready
            };
            self.complete(ready);
            self.offload_assignments(idx);
        }
    }

    /// Run the target assignments partition `idx`'s core emitted on the executor's blocking
    /// thread pool, off this shard's thread (Kafka offloads them to its coordinator's background
    /// threads), and hand each result back; the other groups of the shard go on meanwhile.
    fn offload_assignments(&self, idx: usize) {
        let pending = self.slots[idx].borrow_mut().core.take_assignments();
        for p in pending {
            let Some(table) = self.this.upgrade() else {
                self.assignment_done(idx, p.generation, p.job.run());
                continue;
            };
            glommio::spawn_local(async move {
                let job = p.job;
                let done = glommio::executor().spawn_blocking(move || job.run()).await;
                table.assignment_done(idx, p.generation, done);
            })
            .detach();
        }
    }

    fn assignment_done(&self, idx: usize, generation: u64, done: AssignmentDone) {
        let ready = {
            let mut slot = self.slots[idx].borrow_mut();
            let now = (self.clock)();
            let mut ready = slot
                .core
                .assignment_done(generation, done, now, Instant::now());
            slot.after_output(&mut ready);
            ready
        };
        self.complete(ready);
    }

    pub fn now(&self) -> i64 {
        (self.clock)()
    }

    /// Refresh the gauges (groups, members, rebalances) and hand a copy of this shard's
    /// measurements to the hub. Called once a second by the shard.
    pub fn publish_metrics(&self, shard: usize, hub: &crate::metrics::MetricsHub) {
        let (mut classic, mut consumer, mut members, mut rebalances) = (0u64, 0u64, 0u64, 0u64);
        for s in &self.slots {
            let s = s.borrow();
            let c = s.core.coordinator();
            classic += c.groups.len() as u64;
            consumer += c.consumer_groups.len() as u64;
            members += c
                .groups
                .values()
                .map(|g| g.members.len() as u64)
                .sum::<u64>();
            members += c
                .consumer_groups
                .values()
                .map(|g| g.members.len() as u64)
                .sum::<u64>();
            rebalances += c.rebalances;
        }
        let mut m = self.metrics.borrow_mut();
        m.classic_groups = classic;
        m.consumer_groups = consumer;
        m.members = members;
        m.rebalances = rebalances;
        hub.publish(shard, m.clone());
    }

    /// Records produced so far across owned partitions (tests, diagnostics).
    pub fn records_appended(&self) -> u64 {
        self.slots
            .iter()
            .map(|s| s.borrow().core.records_appended())
            .sum()
    }
}

/// Rebuild one partition's coordinator from its log. Records that do not decode (a type this
/// build does not know) are skipped and counted, as Kafka's loader skips unknown types.
async fn load_partition(
    partition: i32,
    config: &GroupConfig,
    group_configs: Arc<coordinator::group::GroupOverridesMap>,
    dir: GlommioDir,
    log_config: LogConfig,
    now: i64,
) -> anyhow::Result<(
    Coordinator,
    PartitionLog<GlommioDir>,
    storage::log::RecoveryReport,
    u64,
)> {
    let mut coordinator = Coordinator::new(partition, config.clone());
    let mut skipped = 0u64;
    // The newest valid snapshot first (records read in place from the archive), then the log
    // after it. A bad snapshot is skipped for an older one; the log alone still rebuilds state.
    let (snapshot, bad) = storage::snapshot::latest(dir.path())?;
    for (path, reason) in bad {
        tracing::warn!(partition, path = %path.display(), %reason, "ignoring invalid snapshot");
    }
    let mut start_offset = 0;
    if let Some(snap) = &snapshot {
        for r in snap.records().iter() {
            if !coordinator.replay_bytes(r.key.as_slice(), Some(r.value.as_slice())) {
                skipped += 1;
            }
        }
        start_offset = snap.offset + 1;
    }
    let (log, mut report) =
        PartitionLog::open_from_batches(dir, log_config, start_offset, |h, _, _, key, value| {
            if !coordinator.replay_in_batch(
                h.attributes,
                h.producer_id,
                h.producer_epoch,
                key,
                value,
            ) {
                skipped += 1;
            }
        })
        .await
        .map_err(|e| anyhow::anyhow!("loading __consumer_offsets-{partition}: {e}"))?;
    if let Some(snap) = &snapshot {
        report.snapshot = Some((snap.offset, snap.len() as u64, snap.size_bytes() as u64));
    }
    coordinator.group_configs = group_configs;
    coordinator.on_loaded(now);
    Ok((coordinator, log, report, skipped))
}

/// One partition's writer: takes the records waiting, writes them as one batch with one
/// fdatasync, then releases the responses that waited. Records produced meanwhile form the next
/// batch, so the batch size adapts to the load (group commit). What to write, when a snapshot
/// slice or a compaction pass may run, and what a failure means are the core's decisions
/// (`partition_core`); this task does the I/O.
async fn log_writer(
    table: Rc<PartitionTable>,
    idx: usize,
    mut log: PartitionLog<GlommioDir>,
    dir: GlommioDir,
    log_config: LogConfig,
    doorbell: glommio::channels::local_channel::LocalReceiver<()>,
) {
    let compact_config = CompactConfig {
        delete_retention_ms: table.config.delete_retention_ms,
        slice_bytes: COMPACTION_SLICE_BYTES,
    };
    let partition = table.slots[idx].borrow().core.partition();
    let mut compaction: Option<Compaction> = None;
    // A finished snapshot build is written by its own task (a large file and its fsyncs must
    // not hold up commits); the covered segments are removed here once the file is durable.
    let written: Rc<Cell<Option<SnapshotWritten>>> = Rc::new(Cell::new(None));
    loop {
        if let Some(done) = written.take() {
            table.slots[idx].borrow_mut().core.snapshot_written();
            finish_snapshot(partition, &mut log, done).await;
        }
        let now = table.now();
        let rolls = log.rolls();
        if table.slots[idx].borrow().core.compaction_due(rolls, now) {
            compaction = log.start_compaction(
                compact_config.clone(),
                now,
                storage::snapshot::latest_offset(dir.path()),
            );
            let running = compaction.is_some();
            table.slots[idx]
                .borrow_mut()
                .core
                .compaction_started(rolls, running);
        }
        // With a pass or a snapshot under way the writer does not sleep: it looks for pending
        // records between slices, so a request waits for at most one slice.
        let building = table.slots[idx].borrow().core.snapshot_building();
        if compaction.is_none() && !building && doorbell.recv().await.is_none() {
            break;
        }
        if write_pending(&table, idx, &mut log, &dir, &log_config).await {
            // A reload replaced the log (and the coordinator): the core dropped its snapshot
            // build and compaction state, and a pass over the old log is void.
            compaction = None;
        }
        // Nothing is pending now, so the coordinator's state is exactly the durable records:
        // the moment for a slice of the snapshot.
        let started = std::time::Instant::now();
        let step = {
            let mut slot = table.slots[idx].borrow_mut();
            let step = slot
                .core
                .snapshot_slice(log.next_offset(), SNAPSHOT_SLICE_RECORDS);
            if slot.core.snapshot_building() || !matches!(step, Ok(None)) {
                let _ = table
                    .metrics
                    .borrow_mut()
                    .snapshot_slice_us
                    .record((started.elapsed().as_micros() as u64).max(1));
            }
            step
        };
        match step {
            Ok(None) => {}
            Ok(Some(build)) => {
                glommio::spawn_local(write_snapshot(
                    table.clone(),
                    idx,
                    dir.path().to_path_buf(),
                    build,
                    written.clone(),
                ))
                .detach();
            }
            Err(e) => {
                tracing::warn!(partition, error = %e, "snapshot failed; the log still holds everything");
            }
        }
        if let Some(c) = compaction.as_mut() {
            let started = std::time::Instant::now();
            let result = log.compact_slice(c).await;
            let _ = table
                .metrics
                .borrow_mut()
                .compaction_slice_us
                .record((started.elapsed().as_micros() as u64).max(1));
            match result {
                Ok(false) => {}
                Ok(true) => {
                    let st = &c.stats;
                    table.slots[idx]
                        .borrow_mut()
                        .core
                        .compaction_ended(st.next_tombstone_expiry);
                    {
                        let mut m = table.metrics.borrow_mut();
                        m.compaction_passes += 1;
                        m.compaction_bytes_removed += st.bytes_before - st.bytes_after;
                    }
                    tracing::info!(
                        partition,
                        keys = st.keys,
                        records_read = st.records_read,
                        records_kept = st.records_kept,
                        tombstones_removed = st.tombstones_removed,
                        bytes_before = st.bytes_before,
                        bytes_after = st.bytes_after,
                        segments_rewritten = st.segments_cleaned,
                        segments_removed = st.segments_removed,
                        "compacted __consumer_offsets partition"
                    );
                    compaction = None;
                }
                Err(e) => {
                    // The log is whole (a segment is only ever replaced by an atomic rename);
                    // the next roll tries again.
                    tracing::warn!(partition, error = %e, "compaction pass abandoned");
                    table.slots[idx].borrow_mut().core.compaction_ended(None);
                    compaction = None;
                }
            }
        }
        let building = table.slots[idx].borrow().core.snapshot_building();
        if compaction.is_some() || building {
            // Let the shard's requests run before the next slice.
            futures_lite::future::yield_now().await;
        }
    }
}

/// Write every pending record of partition `idx` (group commit: one batch, one write, one
/// fdatasync per round) and release the responses that waited for them. After a failed write
/// the waiting requests fail and the partition is reloaded into `log`; returns whether that
/// happened.
async fn write_pending(
    table: &Rc<PartitionTable>,
    idx: usize,
    log: &mut PartitionLog<GlommioDir>,
    dir: &GlommioDir,
    log_config: &LogConfig,
) -> bool {
    let mut reloaded = false;
    loop {
        let Some(batch) = table.slots[idx].borrow_mut().core.take_batch() else {
            break;
        };
        let (records, upto) = (batch.records.len() as u64, batch.upto);
        // Where this batch starts: everything before it is durable, so a failed append is
        // undone by cutting the log back to here.
        let end = log.next_offset();
        let partition = table.slots[idx].borrow().core.partition();
        // The segment write is not synced: the journal round makes the batch durable (and a
        // checkpoint or the next roll syncs the segment behind it).
        // The batch joins the journal's next round before its segment write starts, without an
        // await in between: every writer a round wakes queues its next batch before the journal
        // task takes the next round, so one fdatasync serves all of them. The segment write runs
        // meanwhile, unsynced (a checkpoint or the next roll syncs it; a checkpoint waits for
        // writes that began before it).
        let prepared = encode_batch(&batch)
            .map_err(std::io::Error::other)
            .and_then(|e| {
                let producer = storage::batch::BatchProducer::coordinator(
                    e.attributes,
                    e.producer_id,
                    e.producer_epoch,
                );
                log.prepare_pairs_as(producer, &e.records, table.now())
            });
        // Only the encoded batch is needed from here on: in a storm, thousands of typed records
        // per partition would otherwise stay in memory for the whole round.
        drop(batch);
        let result = match prepared {
            Ok(bytes) => {
                let journal = table.journal();
                let payload = Payload::Batch {
                    base_offset: end,
                    bytes: bytes.clone(),
                };
                let durable = journal.submit(partition, payload);
                let writing = journal.begin_segment_write();
                let written = log.append_prepared(bytes).await;
                let segment = written.as_ref().ok().and_then(|_| log.active_segment());
                journal.end_segment_write(writing, partition, dir, segment);
                // Both must succeed; either failing fails the batch, and the cut journaled by
                // the reload voids its journal entry if that became durable anyway.
                let durable = durable.await;
                written.and(durable)
            }
            Err(e) => Err(e),
        };
        match result {
            Ok(()) => {
                let released = table.slots[idx].borrow_mut().core.batch_durable(upto);
                {
                    let mut m = table.metrics.borrow_mut();
                    m.records_written += records;
                    let _ = m.batch_records.record(records.max(1));
                    for r in &released {
                        if let Some(since) = r.waited {
                            let _ = m
                                .durable_wait_us
                                .record((since.elapsed().as_micros() as u64).max(1));
                        }
                    }
                }
                table.complete(released);
                table.resume(idx);
            }
            Err(e) => {
                table.metrics.borrow_mut().write_failures += 1;
                let partition = table.slots[idx].borrow().core.partition();
                tracing::error!(partition, error = %e, "write to __consumer_offsets failed; failing waiting requests and reloading the partition");
                let failed = table.slots[idx].borrow_mut().core.batch_failed(end);
                table.complete(failed);
                *log = reload_until_ok(table, idx, dir, log_config).await;
                reloaded = true;
                table.resume(idx);
            }
        }
    }
    reloaded
}

/// A snapshot file written (or not): covered offset, records, build slices, milliseconds from
/// the end of the build to a durable file, older snapshots removed.
type SnapshotWritten = anyhow::Result<(u64, usize, u32, u64, usize)>;

/// Write a built snapshot on a blocking thread (a file of the partition's whole state and its
/// fsyncs), remove older snapshots, and hand the outcome to the writer, waking it.
async fn write_snapshot(
    table: Rc<PartitionTable>,
    idx: usize,
    path: std::path::PathBuf,
    build: SnapshotBuild,
    written: Rc<Cell<Option<SnapshotWritten>>>,
) {
    let covered = build.covered;
    let slices = build.slices;
    // The same bytes in the file format's type (moved, not copied).
    let records: Vec<storage::snapshot::SnapshotRecord> = build
        .into_records()
        .into_iter()
        .map(|r| storage::snapshot::SnapshotRecord {
            key: r.key,
            value: r.value,
        })
        .collect();
    let count = records.len();
    let started = std::time::Instant::now();
    let result = glommio::executor()
        .spawn_blocking(move || -> std::io::Result<usize> {
            storage::snapshot::write(&path, covered, &records)?;
            storage::snapshot::remove_older(&path, covered)
        })
        .await
        .map(|removed| {
            (
                covered,
                count,
                slices,
                started.elapsed().as_millis() as u64,
                removed,
            )
        })
        .map_err(anyhow::Error::from);
    written.set(Some(result));
    if let Some(d) = &table.slots[idx].borrow().doorbell {
        let _ = d.try_send(()); // full = the writer is already due to look
    }
}

/// After a snapshot file is durable: drop the segments whose records it covers.
async fn finish_snapshot(
    partition: i32,
    log: &mut PartitionLog<GlommioDir>,
    done: SnapshotWritten,
) {
    match done {
        Ok((covered, records, slices, millis, removed_snapshots)) => {
            match log.remove_segments_before(covered + 1).await {
                Ok(segments) => tracing::info!(
                    partition,
                    offset = covered,
                    records,
                    slices,
                    millis,
                    removed_segments = segments,
                    removed_snapshots,
                    "wrote __consumer_offsets snapshot"
                ),
                Err(e) => {
                    tracing::warn!(partition, error = %e, "removing segments a snapshot covers failed")
                }
            }
        }
        Err(e) => {
            tracing::warn!(partition, error = %e, "snapshot failed; the log still holds everything")
        }
    }
}

/// Reload a partition after a failed write, retrying while the disk stays unusable. The failed
/// batch (from the core's `discard_from` on) is cut from the log first: it may have reached the file without
/// its fsync.
async fn reload_until_ok(
    table: &Rc<PartitionTable>,
    idx: usize,
    dir: &GlommioDir,
    log_config: &LogConfig,
) -> PartitionLog<GlommioDir> {
    let (partition, end) = {
        let slot = table.slots[idx].borrow();
        let end = slot
            .core
            .discard_from()
            .expect("a failed partition knows what to cut");
        (slot.core.partition(), end)
    };
    loop {
        let loaded = match discard_unacknowledged(dir, log_config, end).await {
            Ok(_) => {
                load_partition(
                    partition,
                    &table.config,
                    table.group_configs_now(),
                    dir.clone(),
                    log_config.clone(),
                    table.now(),
                )
                .await
            }
            Err(e) => Err(anyhow::anyhow!("cutting the failed batch: {e}")),
        };
        // The cut must be in the journal before the partition serves again: the failed batch's
        // entry may have reached an earlier round's file, and recovery must not bring it back.
        let loaded = match loaded {
            Ok(l) => table
                .journal()
                .write(partition, Payload::Cut { offset: end })
                .await
                .map(|()| l)
                .map_err(|e| anyhow::anyhow!("journaling the cut: {e}")),
            Err(e) => Err(e),
        };
        match loaded {
            Ok((coordinator, log, report, _)) => {
                table.slots[idx].borrow_mut().core.reloaded(coordinator);
                tracing::info!(
                    partition,
                    records = report.records,
                    "reloaded __consumer_offsets partition after a failed write"
                );
                return log;
            }
            Err(e) => {
                tracing::error!(partition, error = %e, "reloading partition failed; retrying in 1s");
                glommio::timer::sleep(std::time::Duration::from_secs(1)).await;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_shard_answers_only_for_its_partitions() {
        let t = PartitionTable::new(1, 2, 50, GroupConfig::default());
        let run = |p| futures_lite::future::block_on(t.execute(p, PartitionOp::Status));
        assert_eq!(
            run(3),
            PartitionReply::Status {
                partition: 3,
                shard: 1,
                ops_served: 1
            }
        );
        assert_eq!(
            run(3),
            PartitionReply::Status {
                partition: 3,
                shard: 1,
                ops_served: 2
            }
        );
        assert_eq!(run(4), PartitionReply::Unavailable);
        assert_eq!(
            run(49),
            PartitionReply::Status {
                partition: 49,
                shard: 1,
                ops_served: 1
            }
        );
        assert_eq!(run(51), PartitionReply::Unavailable);
    }

    #[test]
    fn a_loading_partition_answers_load_in_progress() {
        let t = PartitionTable::new(0, 1, 4, GroupConfig::default());
        t.begin_loading();
        let req = crate::group::GroupRequest::Describe { group: "g".into() };
        let ctx = Arc::new(crate::group::RequestContext::default());
        let reply = futures_lite::future::block_on(t.execute(2, PartitionOp::Group { ctx, req }));
        assert_eq!(reply, PartitionReply::Loading);
    }

    /// A KIP-848 join of group `g`: it writes the member's records.
    fn join(member: &str) -> PartitionOp {
        use kafka_protocol::messages::{ConsumerGroupHeartbeatRequest, GroupId, TopicName};
        use kafka_protocol::protocol::StrBytes;
        let req = ConsumerGroupHeartbeatRequest::default()
            .with_group_id(GroupId(StrBytes::from_static_str("g")))
            .with_member_id(StrBytes::from_string(member.to_string()))
            .with_member_epoch(0)
            .with_rebalance_timeout_ms(30_000)
            .with_subscribed_topic_names(Some(vec![TopicName(StrBytes::from_static_str("t"))]))
            .with_topic_partitions(Some(vec![]));
        let ctx = Arc::new(crate::group::RequestContext {
            api_version: 1,
            ..Default::default()
        });
        PartitionOp::Group {
            ctx,
            req: GroupRequest::ConsumerHeartbeat(req),
        }
    }

    fn joined(reply: PartitionReply) -> i32 {
        match reply {
            PartitionReply::Group(GroupResponse::ConsumerHeartbeat(r)) => {
                assert_eq!(r.error_code, 0, "{r:?}");
                r.member_epoch
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn in_memory_mode_a_writing_request_is_answered_while_it_runs() {
        let t = PartitionTable::new(0, 1, 4, GroupConfig::default());
        let p = wire::partition_for("g", 4);
        let mut call = t.execute(p, join("m1"));
        // Memory mode: its records are "durable" as soon as they are taken.
        let reply = call.ready().expect("answered at once, no waiter");
        assert!(joined(reply) > 0);
        assert!(t.waiters.borrow().is_empty());
    }

    #[test]
    fn a_reply_behind_records_not_yet_durable_waits_for_them() {
        let t = PartitionTable::new(0, 1, 4, GroupConfig::default());
        let p = wire::partition_for("g", 4);
        let idx = t.slot_index(p).unwrap();
        // Durable mode as the writer task sees it: a doorbell, and batches durable only when it
        // says so (the writer itself is played by hand below).
        let (doorbell, _rings) = glommio::channels::local_channel::new_bounded(1);
        t.slots[idx].borrow_mut().doorbell = Some(doorbell);
        let mut first = t.execute(p, join("m1"));
        assert!(first.ready().is_none(), "a join that wrote records waits");
        // A request that writes nothing still waits behind the records before it.
        let req = GroupRequest::Describe { group: "g".into() };
        let ctx = Arc::new(crate::group::RequestContext::default());
        let mut second = t.execute(p, PartitionOp::Group { ctx, req });
        assert!(
            second.ready().is_none(),
            "a reply behind pending records waits"
        );
        assert_eq!(t.waiters.borrow().len(), 2);
        // The writer: take the batch, report it durable, release the replies.
        let released = {
            let mut slot = t.slots[idx].borrow_mut();
            let batch = slot.core.take_batch().expect("the join's records");
            slot.core.batch_durable(batch.upto)
        };
        assert_eq!(released.len(), 2);
        t.complete(released);
        assert!(joined(futures_lite::future::block_on(first)) > 0);
        assert!(matches!(
            futures_lite::future::block_on(second),
            PartitionReply::Group(GroupResponse::Describe(_))
        ));
        assert!(t.waiters.borrow().is_empty());
    }
}
