//! The sans-IO core of one `__consumer_offsets` partition: its coordinator and the durability
//! protocol around it.
//!
//! Owns: the records produced but not yet written, the three sequence numbers (produced,
//! handed to the writer, durable), the replies parked behind records that are not yet durable,
//! the single batch in flight, what a failed write leaves behind (the partition is unavailable
//! until reloaded, and the offset its batch started at is cut first), and when a snapshot slice
//! or a compaction pass may run.
//!
//! Must not: touch a file, a socket, a task or a clock. The broker's glommio shell
//! (`partition.rs`: a log writer task per partition on io_uring files) and the simulator's
//! shell (`sim/broker.rs`: fake time, a fault-injecting in-memory disk) drive this same type, so
//! what the simulator checks is the code users run — the shells only do the I/O the core asks
//! for and report back. The design follows TigerBeetle's replica, which is generic over its
//! storage and time (`tigerbeetle/src/vsr/replica.zig`).
//!
//! The protocol, from the shell's side:
//! 1. [`PartitionCore::handle`] (or [`PartitionCore::tick`]) runs the coordinator and returns
//!    the replies that may leave now; records it produced wait in the core.
//! 2. The writer calls [`PartitionCore::take_batch`], writes and syncs the batch, then reports
//!    [`PartitionCore::batch_durable`] (which releases what waited for it) or
//!    [`PartitionCore::batch_failed`] (which fails every waiting request with NOT_COORDINATOR, as
//!    Kafka answers a failed coordinator write, and makes the partition unavailable).
//! 3. After a failure the shell cuts the log back to [`PartitionCore::discard_from`], reloads,
//!    and hands the new coordinator to [`PartitionCore::reloaded`].
//! 4. Between batches, [`PartitionCore::snapshot_slice`] and the compaction calls say when the
//!    background work may advance.
//! 5. A large group's target assignment is not computed on the request path: the shell takes it
//!    with [`PartitionCore::take_assignments`], runs it off the partition's thread
//!    ([`AssignmentJob::run`]) and reports it with [`PartitionCore::assignment_done`], which
//!    writes it if this load of the partition still waits for it.
//! 6. The bytes of records produced and not yet durable are bounded per partition
//!    ([`MAX_QUEUED_BYTES`]): while a partition is over it, [`PartitionCore::must_wait`] says so
//!    and the shell hands new requests to [`PartitionCore::defer`] instead of running them; after
//!    each durable batch it runs what [`PartitionCore::next_runnable`] gives back, in arrival
//!    order. A storm of 100,000 members leaving at once is then written at the disk's pace
//!    instead of piling up its records in memory, and the requests that wait hold their
//!    connections' in-flight slots, so further requests wait in the sockets.
//! 7. Transactions: a TxnOffsetCommit's records are a producer's transactional batch, and a
//!    transaction marker is one control record with no coordinator record behind it
//!    ([`TxnWrite`]). Each is written as a batch of its own: [`Batch::txn`] says which, and
//!    [`encode_batch`] gives the shell the attributes, producer fields and bytes. A marker
//!    counts as one record in the sequence numbers, as it takes one offset in the log. Plain
//!    records only pay for a check of an empty queue.

use crate::group::target::{AssignmentDone, AssignmentJob};
use crate::group::txn::TxnWrite;
use crate::group::{
    failed_response, Coordinator, GroupRequest, GroupResponse, Output, ReqId, RequestContext,
};
use crate::snapshot_build::SnapshotBuild;
use kafka_protocol::ResponseError;
use std::collections::VecDeque;
use std::sync::Arc;
use wire::records::{Record, RecordKey, RecordValue};

/// Largest number of records written as one batch; more waiting records form the next batch.
pub const MAX_RECORDS_PER_BATCH: usize = 4096;

/// Bytes of records (as [`record_bytes`] counts them) a partition may hold produced and not yet
/// durable before new requests wait (see step 6 of the protocol). A steady load keeps a few
/// records queued per partition; 1 MiB is several full batches of member records, so it only
/// binds when requests arrive faster than the disk takes them. One request is always let in
/// while the partition is under the bound, however large its records.
pub const MAX_QUEUED_BYTES: usize = 1 << 20;

/// Kafka maps a failed coordinator write (KAFKA_STORAGE_ERROR) to NOT_COORDINATOR: the client
/// looks the coordinator up again and retries.
const WRITE_FAILED: i16 = ResponseError::NotCoordinator.code();

/// Where a partition is in its life.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    /// Its log is being replayed: requests get COORDINATOR_LOAD_IN_PROGRESS.
    Loading,
    /// Serving requests.
    Serving,
    /// A write failed and the partition waits to be reloaded from disk: requests get
    /// COORDINATOR_NOT_AVAILABLE.
    Failed,
}

/// Why a request cannot be handled now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refusal {
    Loading,
    Unavailable,
}

/// Records handed to the writer: everything up to sequence `upto` once written.
#[derive(Debug)]
pub struct Batch {
    pub records: Vec<Record>,
    pub upto: u64,
    /// `None` for a plain batch; else a producer's transactional offsets (`records`), or a
    /// transaction marker (`records` empty, one control record in the log).
    pub txn: Option<TxnWrite>,
}

/// What a marker waiting to be written counts in [`PartitionCore::queued_bytes`].
const MARKER_BYTES: usize = 64;

/// A run of produced records that is not plain: written as a batch of its own.
#[derive(Debug)]
struct TxnRun {
    /// The sequence number of its first record.
    first: u64,
    /// Records in it (1 for a marker, which has no entry in `pending`).
    len: u64,
    kind: TxnWrite,
}

/// A reply that may leave the broker. `waited` is the tag the shell gave when the reply was
/// parked (the broker's shell passes an `Instant`, to measure the durability wait); `None` for
/// a reply that never waited.
#[derive(Debug)]
pub struct Released<T> {
    pub id: ReqId,
    pub response: GroupResponse,
    pub waited: Option<T>,
}

/// A request that arrived while its partition was over [`MAX_QUEUED_BYTES`]: it runs, in
/// arrival order, once the partition has room (see [`PartitionCore::next_runnable`]).
#[derive(Debug)]
pub struct Deferred<T> {
    pub id: ReqId,
    pub ctx: Arc<RequestContext>,
    pub req: GroupRequest,
    pub tag: T,
}

#[derive(Debug)]
struct Parked<T> {
    /// The sequence that must be durable before the reply may leave.
    needs: u64,
    id: ReqId,
    response: GroupResponse,
    tag: T,
}

/// A target assignment to run off the partition's thread, from the partition's `generation`-th
/// load: hand both back to [`PartitionCore::assignment_done`].
#[derive(Debug)]
pub struct PendingAssignment {
    pub generation: u64,
    pub job: AssignmentJob,
}

/// One partition's coordinator and durability state. `T` tags parked replies (see
/// [`Released`]).
pub struct PartitionCore<T> {
    partition: i32,
    coordinator: Coordinator,
    phase: Phase,
    /// Records produced but not yet handed to the writer, in order.
    pending: VecDeque<Record>,
    /// Transactional runs and markers among the produced records not yet taken, in order.
    txn_runs: VecDeque<TxnRun>,
    /// Markers in `txn_runs` (produced, not taken; they have no entry in `pending`).
    pending_markers: usize,
    /// [`record_bytes`] of `pending`, and of the batch in flight.
    pending_bytes: usize,
    in_flight_bytes: usize,
    /// The bound on `pending_bytes + in_flight_bytes` past which requests wait.
    max_queued_bytes: usize,
    /// Requests waiting for room, in arrival order.
    deferred: VecDeque<Deferred<T>>,
    /// Sequence numbers of records: produced so far, handed to the writer, durable.
    /// Invariant: durable <= written <= appended.
    appended_seq: u64,
    written_seq: u64,
    durable_seq: u64,
    /// The batch the writer holds (its `upto`): at most one at a time.
    in_flight: Option<u64>,
    /// Replies waiting for the records before them, in order of `needs`.
    parked: VecDeque<Parked<T>>,
    /// After a failed write: the log offset its batch started at, which the reload cuts back to.
    discard_from: Option<u64>,
    snapshot_interval: u64,
    /// Records made durable since the last snapshot started.
    since_snapshot: u64,
    build: Option<SnapshotBuild>,
    /// A finished build is being written to its file by the shell.
    snapshot_writing: bool,
    compacting: bool,
    /// The log's roll count when the last pass started (`None`: check the segments found).
    rolls_at_last_pass: Option<u64>,
    /// When a tombstone kept by the last pass expires, which starts the next one.
    tombstone_due: Option<i64>,
    ops_served: u64,
    /// Assignments the coordinator offloaded that the shell has not taken yet.
    assignments: Vec<AssignmentJob>,
    /// Counts loads of the coordinator (start, reload): a result computed for an earlier load
    /// is dropped.
    generation: u64,
}

impl<T: Clone> PartitionCore<T> {
    /// A partition serving `coordinator`, with nothing written yet.
    pub fn new(coordinator: Coordinator) -> Self {
        let snapshot_interval = coordinator.config.snapshot_interval_records.max(1);
        Self {
            partition: coordinator.partition,
            coordinator,
            phase: Phase::Serving,
            pending: VecDeque::new(),
            txn_runs: VecDeque::new(),
            pending_markers: 0,
            pending_bytes: 0,
            in_flight_bytes: 0,
            max_queued_bytes: MAX_QUEUED_BYTES,
            deferred: VecDeque::new(),
            appended_seq: 0,
            written_seq: 0,
            durable_seq: 0,
            in_flight: None,
            parked: VecDeque::new(),
            discard_from: None,
            snapshot_interval,
            since_snapshot: 0,
            build: None,
            snapshot_writing: false,
            compacting: false,
            rolls_at_last_pass: None,
            tombstone_due: None,
            ops_served: 0,
            assignments: Vec::new(),
            generation: 0,
        }
    }

    /// A partition just loaded from its log into `coordinator`, serving; `since_snapshot`
    /// records lie after the newest snapshot.
    pub fn recovered(coordinator: Coordinator, since_snapshot: u64) -> Self {
        let mut core = Self::new(coordinator);
        core.since_snapshot = since_snapshot;
        core
    }

    pub fn partition(&self) -> i32 {
        self.partition
    }

    pub fn phase(&self) -> Phase {
        self.phase
    }

    pub fn coordinator(&self) -> &Coordinator {
        &self.coordinator
    }

    /// For checks that run requests of their own against the live state (the simulator's
    /// oracle) and for [`PartitionCore::deliver`]'s callers that run the coordinator themselves.
    pub fn coordinator_mut(&mut self) -> &mut Coordinator {
        &mut self.coordinator
    }

    /// Count an operation that did not reach the coordinator (a status probe).
    pub fn count_op(&mut self) -> u64 {
        self.ops_served += 1;
        self.ops_served
    }

    /// Records produced so far (written or not).
    pub fn records_appended(&self) -> u64 {
        self.appended_seq
    }

    pub fn pending_len(&self) -> usize {
        self.pending.len() + self.pending_markers
    }

    pub fn parked_len(&self) -> usize {
        self.parked.len()
    }

    pub fn has_pending(&self) -> bool {
        !self.pending.is_empty() || self.pending_markers > 0
    }

    /// Bytes of records produced and not yet durable (pending and in flight).
    pub fn queued_bytes(&self) -> usize {
        self.pending_bytes + self.in_flight_bytes
    }

    /// Requests waiting for room (see [`PartitionCore::defer`]).
    pub fn deferred_len(&self) -> usize {
        self.deferred.len()
    }

    /// Change the bound on queued bytes (the simulator draws small ones so that requests wait
    /// often; the broker keeps [`MAX_QUEUED_BYTES`]).
    pub fn set_max_queued_bytes(&mut self, bytes: usize) {
        assert!(bytes > 0, "a partition must be able to queue something");
        self.max_queued_bytes = bytes;
    }

    /// Whether a request arriving now must wait instead of running: the partition holds
    /// `max_queued_bytes` or more that are not durable yet, or earlier requests wait already
    /// (they run first, so a partition's requests still run in arrival order).
    pub fn must_wait(&self) -> bool {
        !self.deferred.is_empty() || self.queued_bytes() >= self.max_queued_bytes
    }

    /// Keep a request that [`PartitionCore::must_wait`] turned away until there is room.
    pub fn defer(&mut self, d: Deferred<T>) {
        self.deferred.push_back(d);
    }

    /// The next waiting request, once the partition serves and has room again. The shell runs
    /// it as if it had just arrived, and asks again until this says `None`.
    pub fn next_runnable(&mut self) -> Option<Deferred<T>> {
        if self.phase != Phase::Serving || self.queued_bytes() >= self.max_queued_bytes {
            return None;
        }
        self.deferred.pop_front()
    }

    /// Serving with nothing pending or in flight: the coordinator's state is exactly what is
    /// durable.
    pub fn quiescent(&self) -> bool {
        self.phase == Phase::Serving && !self.has_pending() && self.in_flight.is_none()
    }

    /// Whether a request may run now.
    pub fn admit(&self) -> Result<(), Refusal> {
        match self.phase {
            Phase::Serving => Ok(()),
            Phase::Loading => Err(Refusal::Loading),
            Phase::Failed => Err(Refusal::Unavailable),
        }
    }

    /// Run one request: the coordinator handles it at `now`, and the replies that may leave
    /// now are returned. Deadlines it set fire at the shell's next tick, after requests that
    /// arrived meanwhile, as Kafka's timers run as events queued behind the requests already
    /// waiting: two members that join together land in one generation.
    ///
    /// A request that [`PartitionCore::must_wait`] is deferred instead (nothing is returned
    /// for it); [`PartitionCore::resume`] runs it later.
    pub fn handle(
        &mut self,
        id: ReqId,
        ctx: &Arc<RequestContext>,
        req: GroupRequest,
        now: i64,
        tag: T,
    ) -> Vec<Released<T>> {
        assert_eq!(
            self.phase,
            Phase::Serving,
            "requests run only on a serving partition"
        );
        if self.must_wait() {
            self.defer(Deferred {
                id,
                ctx: ctx.clone(),
                req,
                tag,
            });
            return Vec::new();
        }
        self.run(id, ctx, req, now, tag)
    }

    fn run(
        &mut self,
        id: ReqId,
        ctx: &RequestContext,
        req: GroupRequest,
        now: i64,
        tag: T,
    ) -> Vec<Released<T>> {
        self.ops_served += 1;
        let mut out = Output::default();
        self.coordinator.handle(id, ctx, req, now, &mut out);
        self.deliver(out, tag)
    }

    /// Run the deferred requests there is room for now (after a durable batch, or a reload).
    pub fn resume(&mut self, now: i64) -> Vec<Released<T>> {
        let mut ready = Vec::new();
        while let Some(d) = self.next_runnable() {
            ready.extend(self.run(d.id, &d.ctx, d.req, now, d.tag));
        }
        ready
    }

    /// Fire the deadlines due at `now` (nothing unless serving).
    pub fn tick(&mut self, now: i64, tag: T) -> Vec<Released<T>> {
        if self.phase != Phase::Serving || self.next_deadline().is_none_or(|d| d > now) {
            return Vec::new();
        }
        let mut out = Output::default();
        self.coordinator.tick(now, &mut out);
        self.deliver(out, tag)
    }

    /// The coordinator's next deadline, while serving.
    pub fn next_deadline(&self) -> Option<i64> {
        match self.phase {
            Phase::Serving => self.coordinator.next_deadline(),
            _ => None,
        }
    }

    /// Records first, then replies. A reply leaves only once every record produced before it in
    /// this partition is durable — its own, and any earlier one its answer may depend on; a
    /// request that changed nothing in a quiet partition is answered at once.
    pub fn deliver(&mut self, out: Output, tag: T) -> Vec<Released<T>> {
        assert_eq!(
            self.phase,
            Phase::Serving,
            "only a serving partition produces output"
        );
        match out.txn {
            None => {}
            Some(kind @ TxnWrite::Marker { .. }) => {
                self.txn_runs.push_back(TxnRun {
                    first: self.appended_seq + 1,
                    len: 1,
                    kind,
                });
                self.pending_markers += 1;
                self.appended_seq += 1;
                self.pending_bytes += MARKER_BYTES;
            }
            Some(kind @ TxnWrite::Offsets { .. }) => {
                if !out.records.is_empty() {
                    self.txn_runs.push_back(TxnRun {
                        first: self.appended_seq + 1,
                        len: out.records.len() as u64,
                        kind,
                    });
                }
            }
        }
        if !out.records.is_empty() {
            self.appended_seq += out.records.len() as u64;
            self.pending_bytes += out.records.iter().map(record_bytes).sum::<usize>();
            self.pending.extend(out.records);
        }
        self.assignments.extend(out.jobs);
        let mut ready = Vec::new();
        for (id, response) in out.replies {
            if self.durable_seq == self.appended_seq && self.parked.is_empty() {
                ready.push(Released {
                    id,
                    response,
                    waited: None,
                });
            } else {
                self.parked.push_back(Parked {
                    needs: self.appended_seq,
                    id,
                    response,
                    tag: tag.clone(),
                });
            }
        }
        self.check();
        ready
    }

    /// Target assignments to run off the partition's thread (see the module documentation).
    pub fn take_assignments(&mut self) -> Vec<PendingAssignment> {
        let generation = self.generation;
        self.assignments
            .drain(..)
            .map(|job| PendingAssignment { generation, job })
            .collect()
    }

    /// An offloaded assignment has run: the coordinator writes it at `now` if this load of the
    /// partition is serving and still waits for it (else it is dropped: the group computes
    /// again at its next heartbeat). Returns the replies that may leave, as `handle` does.
    pub fn assignment_done(
        &mut self,
        generation: u64,
        done: AssignmentDone,
        now: i64,
        tag: T,
    ) -> Vec<Released<T>> {
        if self.phase != Phase::Serving || generation != self.generation {
            return Vec::new();
        }
        let mut out = Output::default();
        self.coordinator.assignment_done(done, now, &mut out);
        self.deliver(out, tag)
    }

    /// Which load of the coordinator this is (see [`PendingAssignment`]).
    pub fn generation(&self) -> u64 {
        self.generation
    }

    /// The writer takes the next batch (up to [`MAX_RECORDS_PER_BATCH`] records), if there is
    /// one and none is in flight.
    pub fn take_batch(&mut self) -> Option<Batch> {
        if self.phase != Phase::Serving || self.in_flight.is_some() || !self.has_pending() {
            return None;
        }
        let next = self.written_seq + 1;
        // A transactional run or a marker is a batch of its own; plain records before the
        // next run are cut at its start.
        let (n, txn) = match self.txn_runs.front() {
            None => (self.pending.len().min(MAX_RECORDS_PER_BATCH), None),
            Some(run) if run.first == next => {
                let run = self.txn_runs.pop_front().expect("front exists");
                (run.len as usize, Some(run.kind))
            }
            Some(run) => (
                ((run.first - next) as usize).min(MAX_RECORDS_PER_BATCH),
                None,
            ),
        };
        let records: Vec<Record> = if let Some(TxnWrite::Marker { .. }) = txn {
            self.pending_markers -= 1;
            Vec::new()
        } else {
            self.pending.drain(..n).collect()
        };
        // The whole queue (the usual case) takes all its counted bytes; only a batch cut at
        // MAX_RECORDS_PER_BATCH (or at a transactional run) counts its own.
        let bytes = if !self.has_pending() {
            self.pending_bytes
        } else if let Some(TxnWrite::Marker { .. }) = txn {
            MARKER_BYTES
        } else {
            records.iter().map(record_bytes).sum::<usize>()
        };
        self.pending_bytes -= bytes;
        self.in_flight_bytes = bytes;
        // Giving the queue's memory back after a burst: a storm's capacity would otherwise stay
        // with the partition.
        if self.pending.is_empty() && self.pending.capacity() > MAX_RECORDS_PER_BATCH {
            self.pending = VecDeque::new();
        }
        self.written_seq += n as u64;
        self.in_flight = Some(self.written_seq);
        self.check();
        Some(Batch {
            records,
            upto: self.written_seq,
            txn,
        })
    }

    /// The batch up to `upto` is durable: release every reply that waited for it.
    pub fn batch_durable(&mut self, upto: u64) -> Vec<Released<T>> {
        assert_eq!(
            self.in_flight.take(),
            Some(upto),
            "partition {}: only the batch in flight becomes durable",
            self.partition
        );
        assert!(
            upto > self.durable_seq,
            "the durable sequence only moves forward"
        );
        self.since_snapshot += upto - self.durable_seq;
        self.durable_seq = upto;
        self.in_flight_bytes = 0;
        let mut ready = Vec::new();
        while self.parked.front().is_some_and(|p| p.needs <= upto) {
            let p = self.parked.pop_front().expect("front exists");
            ready.push(Released {
                id: p.id,
                response: p.response,
                waited: Some(p.tag),
            });
        }
        self.check();
        ready
    }

    /// The batch in flight failed (its first record would have been at log offset
    /// `batch_start`): nothing that waited on it, or came after it, may be acknowledged. Every
    /// parked reply becomes NOT_COORDINATOR, pending records are dropped, and the partition is
    /// unavailable until [`PartitionCore::reloaded`].
    pub fn batch_failed(&mut self, batch_start: u64) -> Vec<Released<T>> {
        assert!(
            self.in_flight.take().is_some(),
            "partition {}: a failure is reported for the batch in flight",
            self.partition
        );
        self.phase = Phase::Failed;
        self.discard_from = Some(batch_start);
        self.pending.clear();
        self.txn_runs.clear();
        self.pending_markers = 0;
        self.pending_bytes = 0;
        self.in_flight_bytes = 0;
        self.written_seq = self.appended_seq;
        self.durable_seq = self.appended_seq;
        // A pass over the old log and a snapshot of the old state are void after the reload.
        self.build = None;
        self.compacting = false;
        self.rolls_at_last_pass = None;
        let failed = self
            .parked
            .drain(..)
            .map(|p| Released {
                id: p.id,
                response: failed_response(&p.response, WRITE_FAILED),
                waited: Some(p.tag),
            })
            .collect();
        self.check();
        failed
    }

    /// After a failed write: where the reload must cut the log before replaying it (the failed
    /// batch may have reached the file without its fsync).
    pub fn discard_from(&self) -> Option<u64> {
        self.discard_from
    }

    /// The shell reloaded the partition from disk after a failed write.
    pub fn reloaded(&mut self, coordinator: Coordinator) {
        assert_eq!(
            self.phase,
            Phase::Failed,
            "only a failed partition is reloaded"
        );
        assert!(self.parked.is_empty() && self.pending.is_empty());
        self.coordinator = coordinator;
        self.phase = Phase::Serving;
        self.discard_from = None;
        self.new_generation();
    }

    /// A new coordinator: assignments emitted by the previous one are void.
    fn new_generation(&mut self) {
        self.generation += 1;
        self.assignments.clear();
    }

    /// Requests arriving before the log is replayed get COORDINATOR_LOAD_IN_PROGRESS.
    pub fn begin_loading(&mut self) {
        assert!(
            self.quiescent() && self.parked.is_empty() && self.deferred.is_empty(),
            "only an idle partition starts loading"
        );
        self.phase = Phase::Loading;
    }

    /// The log was replayed into `coordinator`; `since_snapshot` records lie after the newest
    /// snapshot.
    pub fn loaded(&mut self, coordinator: Coordinator, since_snapshot: u64) {
        assert_eq!(
            self.phase,
            Phase::Loading,
            "only a loading partition finishes loading"
        );
        self.coordinator = coordinator;
        self.since_snapshot = since_snapshot;
        self.phase = Phase::Serving;
        self.new_generation();
    }

    /// Advance the snapshot by one slice of at most `budget` records, starting a build first if
    /// enough records were made durable since the last one. `log_end` is the log's next offset:
    /// a new build covers everything before it. Only while quiescent: then the coordinator's
    /// state is exactly the durable records (see `snapshot_build` for why slices taken at
    /// different quiescent moments still make a correct snapshot). Returns a finished build,
    /// which the shell writes and then reports with [`PartitionCore::snapshot_written`].
    pub fn snapshot_slice(
        &mut self,
        log_end: u64,
        budget: usize,
    ) -> anyhow::Result<Option<SnapshotBuild>> {
        assert!(
            self.quiescent(),
            "partition {}: a snapshot slice runs only when every record is durable",
            self.partition
        );
        if self.build.is_none()
            && !self.snapshot_writing
            && self.since_snapshot >= self.snapshot_interval
        {
            self.since_snapshot = 0;
            self.build = log_end.checked_sub(1).map(SnapshotBuild::new);
        }
        let Some(b) = self.build.as_mut() else {
            return Ok(None);
        };
        assert!(
            b.covered < log_end,
            "a snapshot covers only written records"
        );
        match b.step(&self.coordinator, budget) {
            Ok(false) => Ok(None),
            Ok(true) => {
                self.snapshot_writing = true;
                Ok(self.build.take())
            }
            Err(e) => {
                self.build = None;
                Err(e)
            }
        }
    }

    /// A snapshot build is under way (the writer keeps slicing instead of sleeping).
    pub fn snapshot_building(&self) -> bool {
        self.build.is_some()
    }

    /// The shell finished writing a snapshot file (or gave up on it).
    pub fn snapshot_written(&mut self) {
        self.snapshot_writing = false;
    }

    /// Whether a compaction pass should start: none is running, and the log rolled a segment
    /// since the last pass started (a closed segment is new) or a tombstone the last pass kept
    /// has expired.
    pub fn compaction_due(&self, rolls: u64, now: i64) -> bool {
        self.phase == Phase::Serving
            && !self.compacting
            && (self.rolls_at_last_pass != Some(rolls)
                || self.tombstone_due.is_some_and(|t| t <= now))
    }

    /// A pass was considered at roll count `rolls`; `running` says whether the log found work.
    pub fn compaction_started(&mut self, rolls: u64, running: bool) {
        self.rolls_at_last_pass = Some(rolls);
        self.tombstone_due = None;
        self.compacting = running;
    }

    /// The pass ended: completed, with the expiry of the earliest tombstone it kept, or
    /// abandoned (`None`; the next roll tries again).
    pub fn compaction_ended(&mut self, next_tombstone_expiry: Option<i64>) {
        assert!(
            self.compacting,
            "a pass ends only if one started ({})",
            self.partition
        );
        self.compacting = false;
        self.tombstone_due = next_tombstone_expiry;
    }

    /// The invariants that hold between any two calls.
    fn check(&self) {
        assert!(
            self.durable_seq <= self.written_seq && self.written_seq <= self.appended_seq,
            "partition {}: durable {} <= written {} <= appended {}",
            self.partition,
            self.durable_seq,
            self.written_seq,
            self.appended_seq
        );
        assert_eq!(
            self.appended_seq - self.written_seq,
            (self.pending.len() + self.pending_markers) as u64,
            "every record produced and not taken is pending"
        );
        assert_eq!(
            self.in_flight.is_some(),
            self.written_seq > self.durable_seq,
            "records are taken and not durable exactly while a batch is in flight"
        );
        assert!(
            self.has_pending() == (self.pending_bytes != 0)
                && (self.in_flight.is_some() || self.in_flight_bytes == 0),
            "partition {}: queued bytes follow the queued records",
            self.partition
        );
        // A parked reply waits for records that are not durable yet; replies wait in order.
        if let Some(p) = self.parked.front() {
            assert!(
                p.needs > self.durable_seq,
                "a reply parked behind durable records"
            );
        }
        if let Some(p) = self.parked.back() {
            assert!(p.needs <= self.appended_seq);
        }
    }
}

/// What a record costs while it waits to be written: its struct plus the heap bytes of its
/// variable-length fields (strings, partition lists, a classic member's metadata and
/// assignment). An estimate, kept cheap: it runs for every record produced. Never 0, so a
/// partition with pending records always counts some bytes.
pub fn record_bytes(r: &Record) -> usize {
    let key = match &r.key {
        RecordKey::LegacyOffsetCommit { group, topic, .. }
        | RecordKey::OffsetCommit { group, topic, .. } => group.len() + topic.len(),
        RecordKey::GroupMetadata { group }
        | RecordKey::ConsumerGroupMetadata { group }
        | RecordKey::ConsumerGroupPartitionMetadata { group }
        | RecordKey::ConsumerGroupTargetAssignmentMetadata { group } => group.len(),
        RecordKey::ConsumerGroupMemberMetadata { group, member_id }
        | RecordKey::ConsumerGroupTargetAssignmentMember { group, member_id }
        | RecordKey::ConsumerGroupCurrentMemberAssignment { group, member_id } => {
            group.len() + member_id.len()
        }
        RecordKey::ConsumerGroupRegularExpression { group, regex } => group.len() + regex.len(),
    };
    // A topic's entry in a partition list: its id (or name) and the list's own header.
    const TOPIC: usize = 48;
    let value = match &r.value {
        None => 0,
        Some(RecordValue::LegacyOffsetCommit(v)) => v.metadata.len(),
        Some(RecordValue::OffsetCommit(v)) => v.metadata.len(),
        Some(RecordValue::GroupMetadata(v)) => v
            .members
            .iter()
            .map(|m| {
                128 + m.member_id.len()
                    + m.client_id.len()
                    + m.client_host.len()
                    + m.subscription.len()
                    + m.assignment.len()
            })
            .sum(),
        Some(RecordValue::ConsumerGroupMetadata(_))
        | Some(RecordValue::ConsumerGroupTargetAssignmentMetadata(_)) => 0,
        Some(RecordValue::ConsumerGroupPartitionMetadata(v)) => v.topics.len() * TOPIC * 2,
        Some(RecordValue::ConsumerGroupMemberMetadata(v)) => {
            v.client_id.len()
                + v.client_host.len()
                + v.subscribed_topic_names
                    .iter()
                    .map(|t| TOPIC + t.len())
                    .sum::<usize>()
                + v.subscribed_topic_regex.as_ref().map_or(0, |x| x.len())
                + v.classic_member_metadata.as_ref().map_or(0, |c| {
                    c.supported_protocols
                        .iter()
                        .map(|p| TOPIC + p.name.len() + p.metadata.len())
                        .sum()
                })
        }
        Some(RecordValue::ConsumerGroupTargetAssignmentMember(v)) => v
            .topic_partitions
            .iter()
            .map(|t| TOPIC + 4 * t.partitions.len())
            .sum(),
        Some(RecordValue::ConsumerGroupCurrentMemberAssignment(v)) => v
            .assigned_partitions
            .iter()
            .chain(&v.partitions_pending_revocation)
            .map(|t| TOPIC + 4 * t.partitions.len())
            .sum(),
        Some(RecordValue::ConsumerGroupRegularExpression(v)) => {
            v.topics.iter().map(|t| TOPIC + t.len()).sum()
        }
    };
    std::mem::size_of::<Record>() + key + value
}

/// A batch's records as `__consumer_offsets` key and value bytes (a tombstone has no value).
pub type EncodedRecords = Vec<(Vec<u8>, Option<Vec<u8>>)>;

/// A batch as the shells write it: attributes, producer id and epoch of its header (0, -1, -1
/// for a plain batch), and its records' key and value bytes.
pub struct EncodedBatch {
    pub attributes: i16,
    pub producer_id: i64,
    pub producer_epoch: i16,
    pub records: EncodedRecords,
}

/// Encode a batch [`PartitionCore::take_batch`] handed out, transactional batches and markers
/// included; both shells write it with `storage::log::PartitionLog::prepare_pairs_as`.
pub fn encode_batch(batch: &Batch) -> Result<EncodedBatch, String> {
    let Some(kind) = batch.txn else {
        return Ok(EncodedBatch {
            attributes: 0,
            producer_id: -1,
            producer_epoch: -1,
            records: encode_records(&batch.records)?,
        });
    };
    let (attributes, producer_id, producer_epoch) = kind.batch_fields();
    let records = match kind {
        TxnWrite::Marker {
            commit,
            coordinator_epoch,
            ..
        } => {
            let (k, v) = crate::group::txn::encode_marker(commit, coordinator_epoch);
            vec![(k, Some(v))]
        }
        TxnWrite::Offsets { .. } => encode_records(&batch.records)?,
    };
    Ok(EncodedBatch {
        attributes,
        producer_id,
        producer_epoch,
        records,
    })
}

/// Encode the records of a batch [`PartitionCore::take_batch`] handed out; both shells (the
/// broker's and the simulator's) append them with `storage::log::PartitionLog::append_pairs`.
pub fn encode_records(records: &[Record]) -> Result<EncodedRecords, String> {
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
    use crate::group::GroupConfig;

    /// The ids of released replies, in order.
    fn ids(released: Vec<Released<u32>>) -> Vec<ReqId> {
        released.into_iter().map(|r| r.id).collect()
    }

    fn core() -> PartitionCore<u32> {
        let mut c = Coordinator::new(0, GroupConfig::default());
        c.start(0);
        PartitionCore::new(c)
    }

    /// A context whose topic registry knows topic "t" (commits to unknown topics are refused).
    fn ctx() -> Arc<RequestContext> {
        use std::sync::OnceLock;
        static TOPICS: OnceLock<std::sync::Arc<crate::topics::TopicsSnapshot>> = OnceLock::new();
        let topics = TOPICS.get_or_init(|| {
            let dir = std::env::temp_dir().join(format!("rl-core-{}", std::process::id()));
            std::fs::create_dir_all(&dir).expect("a temp dir");
            let reg = crate::topics::MemoryTopics::new(50);
            reg.create("t", 1, Default::default()).expect("topic t");
            let snap = reg.snapshot();
            let _ = std::fs::remove_dir_all(&dir);
            snap
        });
        Arc::new(RequestContext {
            topics: topics.clone(),
            group_configs: Default::default(),
            ..Default::default()
        })
    }

    fn commit(group: &str) -> GroupRequest {
        use kafka_protocol::messages::offset_commit_request as oc;
        use kafka_protocol::messages::TopicName;
        let mut t = oc::OffsetCommitRequestTopic::default();
        t.name = TopicName(kafka_protocol::protocol::StrBytes::from_static_str("t"));
        let mut p = oc::OffsetCommitRequestPartition::default();
        p.committed_offset = 5;
        t.partitions.push(p);
        let mut r = kafka_protocol::messages::OffsetCommitRequest::default();
        r.group_id = kafka_protocol::messages::GroupId(
            kafka_protocol::protocol::StrBytes::from_string(group.into()),
        );
        r.generation_id_or_member_epoch = -1;
        r.topics.push(t);
        GroupRequest::OffsetCommit(r)
    }

    #[test]
    fn a_reply_leaves_only_once_its_records_and_all_before_them_are_durable() {
        let mut c = core();
        assert!(c.handle(1, &ctx(), commit("a"), 0, 1).is_empty());
        assert!(c.has_pending());
        let first = c.take_batch().expect("a batch");
        assert!(c.take_batch().is_none(), "one batch in flight at a time");
        // A read-only request after a pending write waits behind it.
        let describe = GroupRequest::Describe { group: "a".into() };
        assert!(c.handle(2, &ctx(), describe, 0, 2).is_empty());
        assert!(c.handle(3, &ctx(), commit("b"), 0, 3).is_empty());
        let released = ids(c.batch_durable(first.upto));
        assert_eq!(
            released,
            [1, 2],
            "the second commit's record is not durable yet"
        );
        let second = c.take_batch().expect("the second commit");
        let released = ids(c.batch_durable(second.upto));
        assert_eq!(released, [3]);
        // Quiet again: a read answers at once.
        let describe = GroupRequest::Describe { group: "a".into() };
        let now = ids(c.handle(4, &ctx(), describe, 0, 4));
        assert_eq!(now, [4]);
        assert!(c.quiescent());
    }

    fn txn_commit(group: &str, pid: i64, guard: crate::group::txn::TxnGuard) -> GroupRequest {
        use kafka_protocol::messages::txn_offset_commit_request as tc;
        use kafka_protocol::messages::*;
        use kafka_protocol::protocol::StrBytes;
        GroupRequest::TxnOffsetCommit(
            TxnOffsetCommitRequest::default()
                .with_group_id(GroupId(StrBytes::from_string(group.into())))
                .with_producer_id(ProducerId(pid))
                .with_generation_id(-1)
                .with_topics(vec![tc::TxnOffsetCommitRequestTopic::default()
                    .with_name(TopicName(StrBytes::from_static_str("t")))
                    .with_partitions(vec![
                        tc::TxnOffsetCommitRequestPartition::default().with_committed_offset(9),
                    ])]),
            guard,
        )
    }

    #[test]
    fn transactional_offsets_and_markers_are_batches_of_their_own() {
        let mut c = core();
        c.handle(1, &ctx(), commit("a"), 0, 1);
        let g = c.coordinator_mut().txn.begin_guard(7).expect("a guard");
        c.handle(2, &ctx(), txn_commit("a", 7, g), 0, 2);
        let g = c.coordinator_mut().txn.begin_guard(7).expect("a guard");
        c.handle(3, &ctx(), txn_commit("b", 7, g), 0, 3);
        let marker = GroupRequest::TxnMarker {
            producer_id: 7,
            producer_epoch: 0,
            commit: true,
            coordinator_epoch: 1,
        };
        c.handle(4, &ctx(), marker, 0, 4);
        c.handle(5, &ctx(), commit("b"), 0, 5);
        assert_eq!(c.records_appended(), 5, "the marker takes one offset");
        assert_eq!(c.pending_len(), 5);
        let mut kinds = Vec::new();
        let mut released = Vec::new();
        while let Some(b) = c.take_batch() {
            let e = encode_batch(&b).expect("encodes");
            kinds.push((
                b.records.len(),
                e.attributes,
                e.producer_id,
                e.records.len(),
            ));
            released.extend(ids(c.batch_durable(b.upto)));
        }
        assert_eq!(
            kinds,
            [
                (1, 0, -1, 1),
                (1, 0x10, 7, 1),
                (1, 0x10, 7, 1),
                (0, 0x30, 7, 1),
                (1, 0, -1, 1)
            ]
        );
        assert_eq!(released, [1, 2, 3, 4, 5]);
        assert!(c.quiescent() && c.queued_bytes() == 0);
        // The marker committed both groups' pending offsets.
        assert_eq!(
            c.coordinator().offsets.get("b", "t", 0).map(|v| v.offset),
            Some(5),
            "the plain commit after the marker"
        );
        assert_eq!(
            c.coordinator().offsets.get("a", "t", 0).map(|v| v.offset),
            Some(9)
        );
    }

    #[test]
    fn a_failed_write_drops_pending_markers_too() {
        let mut c = core();
        c.handle(1, &ctx(), commit("a"), 0, 1);
        let b = c.take_batch().expect("a batch");
        let marker = GroupRequest::TxnMarker {
            producer_id: 7,
            producer_epoch: 0,
            commit: false,
            coordinator_epoch: 1,
        };
        c.handle(2, &ctx(), marker, 0, 2);
        let failed = c.batch_failed(0);
        drop(b);
        assert_eq!(failed.len(), 2);
        assert!(matches!(
            failed[1].response,
            GroupResponse::TxnMarker(WRITE_FAILED)
        ));
        let mut fresh = Coordinator::new(0, GroupConfig::default());
        fresh.start(0);
        c.reloaded(fresh);
        assert!(c.quiescent() && c.pending_len() == 0);
    }

    #[test]
    fn over_its_bound_a_partition_keeps_requests_until_a_durable_batch_makes_room() {
        let mut c = core();
        // Room for about one commit record: the second request finds the partition full.
        let one = c.handle(1, &ctx(), commit("a"), 0, 1);
        assert!(one.is_empty());
        let bound = c.queued_bytes();
        assert!(bound > std::mem::size_of::<Record>(), "a record has a cost");
        c.set_max_queued_bytes(bound);
        assert!(c.must_wait());
        assert!(c.handle(2, &ctx(), commit("b"), 0, 2).is_empty());
        // A read that arrives later waits behind the deferred write, not beside it.
        let describe = GroupRequest::Describe { group: "b".into() };
        assert!(c.handle(3, &ctx(), describe, 0, 3).is_empty());
        assert_eq!(c.deferred_len(), 2);
        assert_eq!(c.records_appended(), 1, "a deferred request has not run");
        let batch = c.take_batch().expect("the first commit");
        assert_eq!(c.queued_bytes(), bound, "the batch in flight still counts");
        assert!(
            c.resume(0).is_empty() && c.deferred_len() == 2,
            "no room yet"
        );
        let released = ids(c.batch_durable(batch.upto));
        assert_eq!(released, [1]);
        assert_eq!(c.queued_bytes(), 0);
        // Room again: the commit runs (and fills the partition), the read waits on.
        assert!(c.resume(0).is_empty());
        assert_eq!(c.deferred_len(), 1);
        assert_eq!(c.records_appended(), 2);
        let batch = c.take_batch().expect("the second commit");
        let released = ids(c.batch_durable(batch.upto));
        assert_eq!(released, [2]);
        let released = ids(c.resume(0));
        assert_eq!(released, [3], "the read runs last, and answers at once");
        assert!(c.quiescent() && !c.must_wait());
    }

    #[test]
    fn requests_deferred_across_a_failed_write_run_after_the_reload() {
        let mut c = core();
        c.set_max_queued_bytes(1);
        c.handle(1, &ctx(), commit("a"), 0, 1);
        c.handle(2, &ctx(), commit("b"), 0, 2);
        assert_eq!(c.deferred_len(), 1);
        let _batch = c.take_batch().expect("a batch");
        let failed = ids(c.batch_failed(0));
        assert_eq!(
            failed,
            [1],
            "only what ran fails; the deferred request never ran"
        );
        assert!(
            c.resume(0).is_empty() && c.deferred_len() == 1,
            "not while failed"
        );
        let mut fresh = Coordinator::new(0, GroupConfig::default());
        fresh.start(0);
        c.reloaded(fresh);
        assert!(c.resume(0).is_empty(), "the commit waits for its record");
        assert_eq!(c.deferred_len(), 0);
        assert_eq!(
            c.pending_len(),
            1,
            "the deferred commit ran on the reloaded partition"
        );
    }

    #[test]
    fn a_failed_batch_fails_every_waiting_reply_and_needs_a_reload() {
        let mut c = core();
        c.handle(1, &ctx(), commit("a"), 0, 1);
        let batch = c.take_batch().expect("a batch");
        c.handle(2, &ctx(), commit("b"), 0, 2);
        let failed = c.batch_failed(17);
        assert_eq!(failed.len(), 2);
        for r in &failed {
            let GroupResponse::OffsetCommit(resp) = &r.response else {
                panic!("a commit fails as a commit: {:?}", r.response);
            };
            assert_eq!(resp.topics[0].partitions[0].error_code, WRITE_FAILED);
        }
        assert_eq!(c.admit(), Err(Refusal::Unavailable));
        assert_eq!(c.discard_from(), Some(17));
        assert!(c.take_batch().is_none(), "nothing is written while failed");
        drop(batch);
        let mut fresh = Coordinator::new(0, GroupConfig::default());
        fresh.start(0);
        c.reloaded(fresh);
        assert_eq!(c.admit(), Ok(()));
        assert_eq!(c.discard_from(), None);
        assert!(c.quiescent());
    }

    fn join(member: &str) -> GroupRequest {
        use kafka_protocol::messages::*;
        use kafka_protocol::protocol::StrBytes;
        GroupRequest::ConsumerHeartbeat(
            ConsumerGroupHeartbeatRequest::default()
                .with_group_id(GroupId(StrBytes::from_static_str("g")))
                .with_member_id(StrBytes::from_string(member.into()))
                .with_member_epoch(0)
                .with_rebalance_timeout_ms(30_000)
                .with_subscribed_topic_names(Some(vec![TopicName(StrBytes::from_static_str("t"))]))
                .with_topic_partitions(Some(vec![])),
        )
    }

    fn offloading_core() -> PartitionCore<u32> {
        let cfg = GroupConfig {
            assignment_offload_min_work: 0,
            ..GroupConfig::default()
        };
        let mut c = Coordinator::new(0, cfg);
        c.start(0);
        PartitionCore::new(c)
    }

    #[test]
    fn an_offloaded_assignment_is_written_when_it_comes_back_to_the_same_load() {
        let mut c = offloading_core();
        c.handle(1, &ctx(), join("A"), 0, 1);
        let mut pending = c.take_assignments();
        assert_eq!(pending.len(), 1);
        assert!(c.take_assignments().is_empty(), "taken once");
        let before = c.records_appended();
        let p = pending.pop().expect("one");
        assert_eq!(p.generation, c.generation());
        let released = c.assignment_done(p.generation, p.job.run(), 5, 9);
        assert!(released.is_empty(), "no reply waits for it");
        // A's target, then the target metadata.
        assert_eq!(c.records_appended(), before + 2);
    }

    #[test]
    fn an_offloaded_assignment_from_before_a_reload_is_dropped() {
        let mut c = offloading_core();
        c.handle(1, &ctx(), join("A"), 0, 1);
        let p = c.take_assignments().pop().expect("one");
        let batch = c.take_batch().expect("the join's records");
        let _ = c.batch_failed(0);
        drop(batch);
        // Results that arrive while the partition is failed, or after it was reloaded (the new
        // coordinator does not wait for them), are dropped.
        let done = p.job.run();
        let mut fresh = Coordinator::new(0, GroupConfig::default());
        fresh.start(0);
        c.reloaded(fresh);
        assert_ne!(p.generation, c.generation());
        let appended = c.records_appended();
        assert!(c.assignment_done(p.generation, done, 5, 9).is_empty());
        assert_eq!(c.records_appended(), appended);
    }

    #[test]
    #[should_panic(expected = "only the batch in flight becomes durable")]
    fn a_batch_never_taken_cannot_become_durable() {
        let mut c = core();
        c.handle(1, &ctx(), commit("a"), 0, 1);
        c.batch_durable(1);
    }

    #[test]
    #[should_panic(expected = "a snapshot slice runs only when every record is durable")]
    fn a_snapshot_slice_never_sees_records_that_are_not_durable() {
        let mut c = core();
        c.handle(1, &ctx(), commit("a"), 0, 1);
        let _ = c.snapshot_slice(1, 10);
    }

    #[test]
    fn snapshots_start_after_the_interval_and_wait_for_the_file() {
        let mut cfg = GroupConfig::default();
        cfg.snapshot_interval_records = 2;
        let mut coord = Coordinator::new(0, cfg);
        coord.start(0);
        let mut c: PartitionCore<u32> = PartitionCore::new(coord);
        let mut end = 0;
        let mut write = |c: &mut PartitionCore<u32>, g: &str, id| {
            c.handle(id, &ctx(), commit(g), 0, 0);
            let b = c.take_batch().expect("a batch");
            end += b.records.len() as u64;
            c.batch_durable(b.upto);
            end
        };
        let e = write(&mut c, "a", 1);
        assert!(
            c.snapshot_slice(e, 100).expect("slice").is_none(),
            "one record: not due"
        );
        let e = write(&mut c, "b", 2);
        let built = c
            .snapshot_slice(e, 100)
            .expect("slice")
            .expect("a whole build");
        assert_eq!(built.covered, e - 1);
        let e = write(&mut c, "c", 3);
        let e = write(&mut c, "d", 4) + e - e;
        assert!(
            c.snapshot_slice(e, 100).expect("slice").is_none(),
            "no second build while the first file is being written"
        );
        c.snapshot_written();
        assert!(c.snapshot_slice(e, 100).expect("slice").is_some());
    }

    #[test]
    fn compaction_starts_after_a_roll_or_an_expired_tombstone() {
        let mut c = core();
        assert!(
            c.compaction_due(0, 0),
            "the first look checks the segments found"
        );
        c.compaction_started(0, true);
        assert!(!c.compaction_due(1, 0), "one pass at a time");
        c.compaction_ended(Some(100));
        assert!(!c.compaction_due(0, 99));
        assert!(c.compaction_due(0, 100), "a kept tombstone expired");
        c.compaction_started(0, false);
        assert!(!c.compaction_due(0, 1000));
        assert!(c.compaction_due(1, 0), "a roll");
    }
}
