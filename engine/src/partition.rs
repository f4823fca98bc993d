//! The `__consumer_offsets` partitions a shard owns, and the operations they answer.
//!
//! Each partition's coordinator (`group::Coordinator`) lives on exactly one shard and is only
//! touched there, through [`crate::router::Router::call`]. Executing a group request runs the
//! pure state machine with the current time, hands the records it produced to the partition's
//! record sink, and releases the responses that became ready — possibly to requests that were
//! parked earlier (a JoinGroup waits for the join phase). A per-shard ticker fires deadlines.

use crate::group::{
    Coordinator, GroupConfig, GroupRequest, GroupResponse, Output, ReqId, RequestContext,
};
use crate::oneshot::OneShot;
use crate::snapshot_build::SnapshotBuild;
use std::cell::{Cell, RefCell};
use std::future::Future;
use std::pin::Pin;
use std::rc::Rc;
use storage::compact::{CompactConfig, Compaction};
use storage::io::GlommioDir;
use storage::log::{LogConfig, PartitionLog};
use wire::records::Record;

/// An operation on one partition, sent to the shard that owns it.
#[derive(Debug)]
pub enum PartitionOp {
    /// Report which shard holds the partition and how many operations it has served.
    Status,
    /// One group's share of a group API request.
    Group {
        ctx: RequestContext,
        req: GroupRequest,
    },
    /// Topic data (Produce, Fetch, ...): executed by the shard's `topic_data::DataStore`; the
    /// route is the owning shard (`topic_data::owner_shard`), not a partition.
    Data(crate::topic_data::DataOp),
}

#[derive(Debug, Clone, PartialEq)]
pub enum PartitionReply {
    Status {
        partition: i32,
        shard: usize,
        ops_served: u64,
    },
    Group(GroupResponse),
    Data(crate::topic_data::DataReply),
    /// The owning shard is gone (shutting down): callers map this to COORDINATOR_NOT_AVAILABLE.
    Unavailable,
    /// The partition is still loading its log: COORDINATOR_LOAD_IN_PROGRESS.
    Loading,
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

/// Largest number of records written as one batch; more waiting records form the next batch.
pub const MAX_RECORDS_PER_BATCH: usize = 4096;

/// Kafka maps a failed coordinator write (KAFKA_STORAGE_ERROR) to NOT_COORDINATOR: the client
/// looks the coordinator up again and retries.
const WRITE_FAILED: i16 = 16;

struct Slot {
    partition: i32,
    coordinator: Coordinator,
    /// False while the partition reloads after a failed write: its requests get
    /// COORDINATOR_NOT_AVAILABLE until it is back.
    available: bool,
    /// True from start-up until its log is loaded: its requests get COORDINATOR_LOAD_IN_PROGRESS.
    loading: bool,
    /// Durable mode: records produced but not yet handed to the log writer, in order.
    pending: std::collections::VecDeque<Record>,
    /// Sequence numbers of records: produced so far, taken by the writer, and durable.
    appended_seq: u64,
    written_seq: u64,
    durable_seq: u64,
    /// Responses waiting for the records before them to be durable: (needed seq, request, response).
    parked: std::collections::VecDeque<(u64, ReqId, GroupResponse, std::time::Instant)>,
    /// Wakes the partition's log writer; None = memory mode (no data directory).
    doorbell: Option<glommio::channels::local_channel::LocalSender<()>>,
    memory: std::collections::VecDeque<Record>,
    ops_served: u64,
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
}

/// Milliseconds since the Unix epoch: Kafka's commit timestamps and deadlines use wall time.
pub fn wall_clock_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
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
                    partition: p,
                    coordinator,
                    available: true,
                    loading: false,
                    pending: Default::default(),
                    appended_seq: 0,
                    written_seq: 0,
                    durable_seq: 0,
                    parked: Default::default(),
                    doorbell: None,
                    memory: Default::default(),
                    ops_served: 0,
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
        }
    }

    /// Durable mode: load every owned partition from `DATA/__consumer_offsets-<p>/` (replaying its
    /// records into the coordinator) and start its log writer. Partitions load one after another
    /// on this shard while the other shards load theirs in parallel.
    pub async fn open_logs(
        self: &Rc<Self>,
        data_dir: &std::path::Path,
        log_config: LogConfig,
    ) -> anyhow::Result<Vec<LoadReport>> {
        let mut reports = Vec::new();
        for idx in 0..self.slots.len() {
            let partition = self.slots[idx].borrow().partition;
            let dir = GlommioDir::new(data_dir.join(format!("__consumer_offsets-{partition}")))?;
            let started = std::time::Instant::now();
            let (coordinator, log, report, skipped) = load_partition(
                partition,
                &self.config,
                dir.clone(),
                log_config.clone(),
                self.now(),
            )
            .await?;
            let (tx, rx) = glommio::channels::local_channel::new_bounded(1);
            {
                let mut slot = self.slots[idx].borrow_mut();
                slot.coordinator = coordinator;
                slot.doorbell = Some(tx);
                slot.loading = false;
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

    /// Mark every owned partition as loading, before the listener opens: requests arriving
    /// before a partition's log is replayed get COORDINATOR_LOAD_IN_PROGRESS and retry.
    pub fn begin_loading(&self) {
        for s in &self.slots {
            s.borrow_mut().loading = true;
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
    pub fn execute(
        &self,
        partition: i32,
        op: PartitionOp,
    ) -> Pin<Box<dyn Future<Output = PartitionReply>>> {
        let Some(idx) = self.slot_index(partition) else {
            return Box::pin(std::future::ready(PartitionReply::Unavailable));
        };
        match op {
            // Routed to the shard's DataStore before reaching here (server.rs).
            PartitionOp::Data(_) => Box::pin(std::future::ready(PartitionReply::Unavailable)),
            PartitionOp::Status => {
                let mut slot = self.slots[idx].borrow_mut();
                slot.ops_served += 1;
                let reply = PartitionReply::Status {
                    partition,
                    shard: self.shard,
                    ops_served: slot.ops_served,
                };
                Box::pin(std::future::ready(reply))
            }
            PartitionOp::Group { ctx, req } => {
                if self.slots[idx].borrow().loading {
                    return Box::pin(std::future::ready(PartitionReply::Loading));
                }
                if !self.slots[idx].borrow().available {
                    return Box::pin(std::future::ready(PartitionReply::Unavailable));
                }
                let id = self.next_req.get();
                self.next_req.set(id + 1);
                let waiter = OneShot::new();
                self.waiters.borrow_mut().insert(id, waiter.clone());
                let now = (self.clock)();
                let mut out = Output::default();
                {
                    let mut slot = self.slots[idx].borrow_mut();
                    slot.ops_served += 1;
                    // Deadlines this request set (a zero initial rebalance delay, say) fire at
                    // the next tick, after requests that arrived meanwhile, as Kafka's timers
                    // run as events queued behind the requests already waiting: two members
                    // that join together land in one generation.
                    slot.coordinator.handle(id, &ctx, req, now, &mut out);
                }
                self.deliver(idx, out);
                Box::pin(async move { PartitionReply::Group(waiter.wait().await) })
            }
        }
    }

    /// Records first, then responses. In durable mode a response is released only once every
    /// record produced before it in this partition is on disk — its own, and any earlier one its
    /// answer may depend on; a request that changed nothing in a quiet partition answers at once.
    fn deliver(&self, idx: usize, out: Output) {
        let mut ready = Vec::new();
        {
            let mut slot = self.slots[idx].borrow_mut();
            let slot = &mut *slot;
            match &slot.doorbell {
                None => {
                    for r in out.records {
                        if slot.memory.len() == IN_MEMORY_MAX_RECORDS {
                            slot.memory.pop_front();
                        }
                        slot.memory.push_back(r);
                    }
                    ready = out.replies;
                }
                Some(doorbell) => {
                    if !out.records.is_empty() {
                        slot.appended_seq += out.records.len() as u64;
                        slot.pending.extend(out.records);
                        let _ = doorbell.try_send(()); // full = the writer is already due to look
                    }
                    for (id, resp) in out.replies {
                        if slot.durable_seq >= slot.appended_seq && slot.parked.is_empty() {
                            ready.push((id, resp));
                        } else {
                            slot.parked.push_back((
                                slot.appended_seq,
                                id,
                                resp,
                                std::time::Instant::now(),
                            ));
                        }
                    }
                }
            }
        }
        self.complete(ready);
    }

    fn complete(&self, replies: Vec<(ReqId, GroupResponse)>) {
        if replies.is_empty() {
            return;
        }
        let mut waiters = self.waiters.borrow_mut();
        for (id, resp) in replies {
            if let Some(w) = waiters.remove(&id) {
                w.complete(resp);
            }
        }
    }

    /// The writer made records up to `seq` durable: release what waited for them.
    fn mark_durable(&self, idx: usize, seq: u64) {
        let mut ready = Vec::new();
        {
            let mut slot = self.slots[idx].borrow_mut();
            slot.durable_seq = seq;
            let mut m = self.metrics.borrow_mut();
            while slot
                .parked
                .front()
                .is_some_and(|(need, _, _, _)| *need <= seq)
            {
                let (_, id, resp, since) = slot.parked.pop_front().expect("front exists");
                let _ = m
                    .durable_wait_us
                    .record((since.elapsed().as_micros() as u64).max(1));
                ready.push((id, resp));
            }
        }
        self.complete(ready);
    }

    /// A write failed: nothing that waited on it (or came after it) may be acknowledged. Their
    /// requests get NOT_COORDINATOR and the partition is unavailable until reloaded from disk.
    fn fail_pending(&self, idx: usize) {
        let mut failed = Vec::new();
        {
            let mut slot = self.slots[idx].borrow_mut();
            slot.available = false;
            slot.pending.clear();
            slot.written_seq = slot.appended_seq;
            slot.durable_seq = slot.appended_seq;
            for (_, id, resp, _) in slot.parked.drain(..) {
                failed.push((id, crate::group::failed_response(&resp, WRITE_FAILED)));
            }
        }
        self.complete(failed);
    }

    /// Fire every due deadline of every partition.
    pub fn tick(&self, now: i64) {
        for idx in 0..self.slots.len() {
            let mut out = Output::default();
            {
                let mut slot = self.slots[idx].borrow_mut();
                if slot.loading
                    || !slot.available
                    || !slot.coordinator.next_deadline().is_some_and(|d| d <= now)
                {
                    continue;
                }
                slot.coordinator.tick(now, &mut out);
            }
            self.deliver(idx, out);
        }
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
            let c = &s.coordinator;
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
            .map(|s| {
                let s = s.borrow();
                s.appended_seq + s.memory.len() as u64
            })
            .sum()
    }
}

/// Rebuild one partition's coordinator from its log. Records that do not decode (a type this
/// build does not know) are skipped and counted, as Kafka's loader skips unknown types.
async fn load_partition(
    partition: i32,
    config: &GroupConfig,
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
        PartitionLog::open_from(dir, log_config, start_offset, |_, _, key, value| {
            if !key.is_some_and(|k| coordinator.replay_bytes(k, value)) {
                skipped += 1;
            }
        })
        .await
        .map_err(|e| anyhow::anyhow!("loading __consumer_offsets-{partition}: {e}"))?;
    if let Some(snap) = &snapshot {
        report.snapshot = Some((snap.offset, snap.len() as u64, snap.size_bytes() as u64));
    }
    coordinator.on_loaded(now);
    Ok((coordinator, log, report, skipped))
}

/// One partition's writer: takes the records waiting, writes them as one batch with one
/// fdatasync, then releases the responses that waited. Records produced meanwhile form the next
/// batch, so the batch size adapts to the load (group commit).
async fn log_writer(
    table: Rc<PartitionTable>,
    idx: usize,
    mut log: PartitionLog<GlommioDir>,
    dir: GlommioDir,
    log_config: LogConfig,
    doorbell: glommio::channels::local_channel::LocalReceiver<()>,
) {
    let snapshot_interval = table.config.snapshot_interval_records.max(1);
    let mut since_snapshot = log
        .next_offset()
        .saturating_sub(storage::snapshot::latest_offset(dir.path()).map_or(0, |o| o + 1));
    let compact_config = CompactConfig {
        delete_retention_ms: table.config.delete_retention_ms,
        slice_bytes: COMPACTION_SLICE_BYTES,
    };
    // A compaction pass starts after the log rolls a segment (so a closed segment is new) or
    // once a tombstone kept by the last pass has expired; `None` for the roll count makes the
    // first wake-up after opening the log check the segments it found.
    let mut compaction: Option<Compaction> = None;
    let mut rolls_at_last_pass: Option<u64> = None;
    let mut tombstone_due: Option<i64> = None;
    // A snapshot is built in slices between group commits, then written by its own task (a
    // large file and its fsyncs must not hold up commits); the covered segments are removed
    // here once the file is durable.
    let mut build: Option<SnapshotBuild> = None;
    let written: Rc<Cell<Option<SnapshotWritten>>> = Rc::new(Cell::new(None));
    let mut writing = false;
    loop {
        if let Some(done) = written.take() {
            writing = false;
            finish_snapshot(&table, idx, &mut log, done).await;
        }
        if compaction.is_none()
            && (rolls_at_last_pass != Some(log.rolls())
                || tombstone_due.is_some_and(|t| t <= table.now()))
        {
            rolls_at_last_pass = Some(log.rolls());
            tombstone_due = None;
            compaction = log.start_compaction(
                compact_config.clone(),
                table.now(),
                storage::snapshot::latest_offset(dir.path()),
            );
        }
        // With a pass or a snapshot under way the writer does not sleep: it looks for pending
        // records between slices, so a request waits for at most one slice.
        if compaction.is_none() && build.is_none() && doorbell.recv().await.is_none() {
            break;
        }
        if write_pending(
            &table,
            idx,
            &mut log,
            &dir,
            &log_config,
            &mut since_snapshot,
        )
        .await
        {
            // A reload replaced the log (and the coordinator): a pass over the old log and a
            // snapshot of the old state are void.
            compaction = None;
            rolls_at_last_pass = None;
            build = None;
        }
        if build.is_none() && !writing && since_snapshot >= snapshot_interval {
            since_snapshot = 0;
            build = log.next_offset().checked_sub(1).map(SnapshotBuild::new);
        }
        // Nothing is pending now, so the coordinator's state is exactly the durable records:
        // the moment for a slice of the snapshot (see `snapshot_build` for why slices taken at
        // different moments still make a correct snapshot).
        if let Some(b) = build.as_mut() {
            let started = std::time::Instant::now();
            let step = b.step(
                &table.slots[idx].borrow().coordinator,
                SNAPSHOT_SLICE_RECORDS,
            );
            let _ = table
                .metrics
                .borrow_mut()
                .snapshot_slice_us
                .record((started.elapsed().as_micros() as u64).max(1));
            match step {
                Ok(false) => {}
                Ok(true) => {
                    let b = build.take().expect("a build");
                    writing = true;
                    glommio::spawn_local(write_snapshot(
                        table.clone(),
                        idx,
                        dir.path().to_path_buf(),
                        b,
                        written.clone(),
                    ))
                    .detach();
                }
                Err(e) => {
                    let partition = table.slots[idx].borrow().partition;
                    tracing::warn!(partition, error = %e, "snapshot failed; the log still holds everything");
                    build = None;
                }
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
            let partition = table.slots[idx].borrow().partition;
            match result {
                Ok(false) => {}
                Ok(true) => {
                    let st = &c.stats;
                    tombstone_due = st.next_tombstone_expiry;
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
                    compaction = None;
                }
            }
        }
        if compaction.is_some() || build.is_some() {
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
    since_snapshot: &mut u64,
) -> bool {
    let mut reloaded = false;
    loop {
        let (records, upto) = {
            let mut slot = table.slots[idx].borrow_mut();
            if slot.pending.is_empty() {
                break;
            }
            let n = slot.pending.len().min(MAX_RECORDS_PER_BATCH);
            let records: Vec<Record> = slot.pending.drain(..n).collect();
            slot.written_seq += n as u64;
            (records, slot.written_seq)
        };
        let started = std::time::Instant::now();
        // Where this batch starts: everything before it is durable, so a failed append is
        // undone by cutting the log back to here.
        let end = log.next_offset();
        let result = match encode_records(&records) {
            Ok(kv) => {
                let refs: Vec<(Option<&[u8]>, Option<&[u8]>)> = kv
                    .iter()
                    .map(|(k, v)| (Some(k.as_slice()), v.as_deref()))
                    .collect();
                log.append(&refs, table.now()).await.map(|_| ())
            }
            Err(e) => Err(std::io::Error::other(e)),
        };
        match result {
            Ok(()) => {
                *since_snapshot += records.len() as u64;
                {
                    let mut m = table.metrics.borrow_mut();
                    m.fsyncs += 1;
                    m.records_written += records.len() as u64;
                    let _ = m
                        .fsync_us
                        .record((started.elapsed().as_micros() as u64).max(1));
                    let _ = m.batch_records.record((records.len() as u64).max(1));
                }
                table.mark_durable(idx, upto);
            }
            Err(e) => {
                table.metrics.borrow_mut().write_failures += 1;
                let partition = table.slots[idx].borrow().partition;
                tracing::error!(partition, error = %e, "write to __consumer_offsets failed; failing waiting requests and reloading the partition");
                table.fail_pending(idx);
                *log = reload_until_ok(table, idx, dir, log_config, end).await;
                reloaded = true;
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
    let records = build.into_records();
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
    table: &Rc<PartitionTable>,
    idx: usize,
    log: &mut PartitionLog<GlommioDir>,
    done: SnapshotWritten,
) {
    let partition = table.slots[idx].borrow().partition;
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
/// batch (from offset `end` on) is cut from the log first: it may have reached the file without
/// its fsync.
async fn reload_until_ok(
    table: &Rc<PartitionTable>,
    idx: usize,
    dir: &GlommioDir,
    log_config: &LogConfig,
    end: u64,
) -> PartitionLog<GlommioDir> {
    let partition = table.slots[idx].borrow().partition;
    loop {
        let loaded = match discard_unacknowledged(dir, log_config, end).await {
            Ok(_) => {
                load_partition(
                    partition,
                    &table.config,
                    dir.clone(),
                    log_config.clone(),
                    table.now(),
                )
                .await
            }
            Err(e) => Err(anyhow::anyhow!("cutting the failed batch: {e}")),
        };
        match loaded {
            Ok((coordinator, log, report, _)) => {
                let mut slot = table.slots[idx].borrow_mut();
                slot.coordinator = coordinator;
                slot.available = true;
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

/// Cut a partition log back to offset `end` after an append of a batch starting there failed:
/// truncate the segment holding it, remove segments created for it, and make that durable.
///
/// What the failed append left in the file may not be durable (the write can land while the
/// fsync fails; on Linux the page cache keeps serving those bytes even though they may never
/// reach the disk). A reload that replayed them answered clients from state a power loss could
/// still take back; and when the next append rolled to a new segment, a torn copy of them in the
/// old one made recovery cut the log there and drop every later segment — acknowledged commits
/// included. Returns the number of bytes and segment files removed.
pub async fn discard_unacknowledged<D: storage::io::LogDir>(
    dir: &D,
    config: &LogConfig,
    end: u64,
) -> std::io::Result<(u64, usize)> {
    use storage::io::LogFile;
    let mut bases: Vec<u64> = dir
        .list()
        .await?
        .iter()
        .filter_map(|n| storage::log::parse_segment_name(n))
        .collect();
    bases.sort_unstable();
    let (mut bytes, mut files) = (0u64, 0usize);
    for base in bases.iter().filter(|b| **b >= end) {
        dir.remove(&storage::log::segment_name(*base)).await?;
        files += 1;
    }
    // Only the last segment that starts before `end` can hold bytes at or after it.
    if let Some(base) = bases.iter().rev().find(|b| **b < end) {
        let file = dir.open(&storage::log::segment_name(*base)).await?;
        let len = file.len().await?;
        let mut cut_at = None;
        let (valid, _) = storage::log::scan_batches(
            &file,
            len,
            config.read_chunk_bytes,
            config.max_batch_bytes,
            |pos, h, _| {
                if h.base_offset >= end {
                    cut_at = Some(pos);
                    return Err("the failed batch".into());
                }
                Ok(())
            },
        )
        .await?;
        let keep = cut_at.unwrap_or(valid);
        if keep < len {
            file.truncate(keep).await?;
            file.sync().await?;
            bytes = len - keep;
        }
    }
    if files > 0 {
        dir.sync_dir().await?;
    }
    Ok((bytes, files))
}

fn encode_records(records: &[Record]) -> Result<Vec<(Vec<u8>, Option<Vec<u8>>)>, String> {
    records
        .iter()
        .map(|r| {
            Ok((
                r.encode_key().map_err(|e| e.to_string())?,
                r.encode_value().map_err(|e| e.to_string())?,
            ))
        })
        .collect()
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
    fn a_failed_append_is_cut_before_the_reload_so_later_batches_survive_a_crash() {
        // Found by the simulator (engine/src/sim): an append whose write landed but whose fsync
        // failed left the batch in a new segment; the reload replayed it, the next appends
        // rolled to newer segments and were acknowledged, and a power loss then tore the
        // unsynced batch: recovery cut the log there and removed every later segment.
        use futures_lite::future::block_on;
        use storage::io::MemDir;
        let dir = MemDir::new();
        let cfg = LogConfig {
            segment_bytes: 150,
            max_batch_bytes: 1 << 20,
            read_chunk_bytes: 64,
        };
        let open = |dir: &MemDir| {
            let mut keys = Vec::new();
            let (log, _) = block_on(PartitionLog::open(
                dir.clone(),
                cfg.clone(),
                |_, _, k, _| keys.push(k.map(<[u8]>::to_vec).unwrap_or_default()),
            ))
            .expect("the log opens");
            (log, keys)
        };
        let value = vec![7u8; 100];
        let (mut log, _) = open(&dir);
        block_on(log.append(&[(Some(b"a"), Some(&value))], 0)).expect("a healthy append");
        // The next append rolls (open, truncate, dir sync), writes, and its fsync fails.
        dir.fail_after(4);
        let end = log.next_offset();
        assert!(block_on(log.append(&[(Some(b"f"), Some(&value))], 0)).is_err());
        dir.heal();
        // What the writer does next: cut the failed batch, then reload.
        let (_, removed) = block_on(discard_unacknowledged(&dir, &cfg, end)).expect("cut");
        assert_eq!(removed, 1, "the segment rolled for the failed batch goes");
        let (mut log, keys) = open(&dir);
        assert_eq!(
            keys,
            [b"a".to_vec()],
            "the reload must not see the failed batch"
        );
        for k in [b"b", b"c"] {
            block_on(log.append(&[(Some(k), Some(&value))], 0)).expect("acknowledged append");
        }
        // Power loss: unsynced bytes are torn half-way.
        dir.crash(|_, unsynced| unsynced / 2);
        let (_, keys) = open(&dir);
        assert_eq!(
            keys,
            [b"a".to_vec(), b"b".to_vec(), b"c".to_vec()],
            "every acknowledged batch must survive the crash"
        );
    }

    #[test]
    fn a_loading_partition_answers_load_in_progress() {
        let t = PartitionTable::new(0, 1, 4, GroupConfig::default());
        t.begin_loading();
        let req = crate::group::GroupRequest::Describe { group: "g".into() };
        let ctx = crate::group::RequestContext::default();
        let reply = futures_lite::future::block_on(t.execute(2, PartitionOp::Group { ctx, req }));
        assert_eq!(reply, PartitionReply::Loading);
    }
}
