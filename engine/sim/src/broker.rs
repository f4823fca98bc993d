//! The simulated broker: per `__consumer_offsets` partition, the broker's own sans-IO
//! partition core ([`PartitionCore`]: the coordinator, group commit, parked replies, failure and
//! reload, snapshot and compaction scheduling) over the real segment log on a fault-injecting
//! in-memory disk.
//!
//! This is the simulator's shell around the core, as `partition.rs` is the broker's: it does the
//! I/O the core asks for — a writer "task" as two events (take a batch; its write + fsync
//! completes or fails after a drawn latency), the reload after a failure, snapshot files and
//! compaction slices — with fake time, and tells the oracle what happened. It decides nothing
//! the broker's shell does not also leave to the core.

use super::world::{Ev, Reply, ReqMsg, World};
use engine::group::txn::TxnWrite;
use engine::group::{Coordinator, GroupRequest, GroupResponse, Output, ReqId, RequestContext};
use engine::partition_core::{Deferred, PartitionCore, Phase, Refusal, Released};
use futures_lite::future::block_on;
use kafka_protocol::ResponseError;
use std::sync::Arc;
use storage::io::MemDir;
use storage::log::PartitionLog;
use wire::records::Record;

/// The broker's deadline ticker runs every 5 ms.
const TICK_MS: i64 = 5;

/// What the oracle needs to know about a request when its response is released.
#[derive(Debug, Clone)]
pub(super) struct Route {
    pub client: usize,
    pub corr: u64,
    pub group: usize,
    pub kind: RouteKind,
    /// A second copy of a request already processed: the coordinator handles it again (a
    /// stale retry arriving late), but its answer goes to a connection the client abandoned.
    pub ghost: bool,
}

#[derive(Debug, Clone)]
pub(super) enum RouteKind {
    /// (topic, partition, offset) per committed partition.
    Commit(Vec<(String, i32, i64)>),
    Sync {
        generation: i32,
    },
    Join,
    ConsumerHeartbeat {
        member: String,
    },
    /// A transaction marker of marker job `job` (`txn.rs`); its answer goes back to the job.
    Marker {
        job: u64,
    },
    /// A transactional client's TxnOffsetCommit: the producer, the transaction the
    /// verification found it in, and (topic, partition, offset) per partition.
    TxnCommit {
        producer_id: i64,
        tag: Option<super::txn::TxnKey>,
        parts: Vec<(String, i32, i64)>,
    },
    TxnFetch {
        require_stable: bool,
    },
    Other,
}

/// A snapshot as the simulator keeps it: written atomically (the real one is tmp + fsync +
/// rename + dir fsync), so a crash leaves the previous one or this one.
#[derive(Debug, Clone)]
pub(super) struct Snap {
    pub offset: u64,
    pub records: Vec<engine::snapshot_build::SnapshotRecord>,
}

/// One batch of records in flight to the disk. As in the broker's writer, it joins the
/// journal's next round when it is taken, and its segment write (unsynced) runs meanwhile; it
/// is durable once both are done and the round succeeded.
#[derive(Debug)]
pub(super) struct InFlight {
    pub records: Vec<Record>,
    /// A producer's transactional offsets or a transaction marker (`None`: plain records).
    pub txn: Option<TxnWrite>,
    pub upto: u64,
    /// Where the log ended before this batch (a failure cuts back to it).
    pub end: u64,
    /// The encoded batch, until its segment write ran.
    pub bytes: Option<Vec<u8>>,
    /// Its journal round succeeded.
    pub journaled: bool,
    /// The checkpoint epoch its segment write started in.
    pub epoch: u64,
}

pub(super) struct Slot {
    pub partition: i32,
    pub dir: MemDir,
    /// The partition as the broker runs it; `None` while the process is down.
    pub core: Option<PartitionCore<()>>,
    pub log: Option<PartitionLog<MemDir>>,
    pub snapshot: Option<Snap>,
    /// Requests before this time get COORDINATOR_LOAD_IN_PROGRESS: the listener is open while
    /// the partition still loads (the broker's core is in `Phase::Loading` then).
    pub loading_until: i64,
    /// The batch the writer took, with its records (which a crash may tear).
    pub in_flight: Option<InFlight>,
    pub writer_scheduled: bool,
    pub disk_failing: bool,
    pub tick_at: Option<i64>,
    /// Increments with every load (start, restart, reload): one "uptime" of the coordinator.
    pub load: u64,
    /// The oracle's view of the log: `shadow` is the state every acknowledged response relies on
    /// (replayed from the batches whose append succeeded); `tail` holds batches that may or may
    /// not be on disk (a failed append that left bytes behind, the batch cut by a crash).
    pub shadow: Coordinator,
    pub tail: Vec<(Option<TxnWrite>, Vec<Record>)>,
    pub next_d_check: i64,
    /// What the last load's recovery found (for failure messages).
    pub last_report: Option<storage::log::RecoveryReport>,
    /// `log_writer`'s compaction pass under way (the core decides when one starts).
    pub compaction: Option<storage::compact::Compaction>,
}

impl Slot {
    pub fn new(partition: i32) -> Self {
        Self {
            partition,
            dir: MemDir::new(),
            core: None,
            log: None,
            snapshot: None,
            loading_until: 0,
            in_flight: None,
            writer_scheduled: false,
            disk_failing: false,
            tick_at: None,
            load: 0,
            shadow: Coordinator::new(partition, Default::default()),
            tail: Vec::new(),
            next_d_check: 0,
            last_report: None,
            compaction: None,
        }
    }

    /// The coordinator of a serving partition (none while down, or failed and not reloaded).
    pub fn coordinator(&self) -> Option<&Coordinator> {
        self.core
            .as_ref()
            .filter(|c| c.phase() == Phase::Serving)
            .map(|c| c.coordinator())
    }

    pub fn coordinator_mut(&mut self) -> Option<&mut Coordinator> {
        self.core
            .as_mut()
            .filter(|c| c.phase() == Phase::Serving)
            .map(|c| c.coordinator_mut())
    }

    pub fn available(&self) -> bool {
        self.coordinator().is_some()
    }

    pub fn pending_len(&self) -> usize {
        self.core.as_ref().map_or(0, |c| c.pending_len())
    }

    pub fn parked_len(&self) -> usize {
        self.core.as_ref().map_or(0, |c| c.parked_len())
    }

    fn core_mut(&mut self) -> &mut PartitionCore<()> {
        self.core
            .as_mut()
            .expect("a running broker has a core per partition")
    }
}

/// The writer's encoding (`write_pending`): the broker's own, one batch at the log's end. A
/// record that does not encode is a coordinator bug, not a disk fault, so it stops the seed
/// instead of failing the write.
fn prepare(
    log: &PartitionLog<MemDir>,
    batch: &engine::partition_core::Batch,
    now: i64,
) -> std::io::Result<Vec<u8>> {
    let e = engine::partition_core::encode_batch(batch).expect("coordinator records encode");
    let producer =
        storage::batch::BatchProducer::coordinator(e.attributes, e.producer_id, e.producer_epoch);
    log.prepare_pairs_as(producer, &e.records, now)
}

/// A record's value in a trace line.
fn brief_value(v: &Option<wire::records::RecordValue>) -> String {
    use wire::records::RecordValue as V;
    match v {
        None => "tombstone".into(),
        Some(V::GroupMetadata(g)) => format!(
            "generation {} leader {:?} members {:?}",
            g.generation,
            g.leader,
            g.members
                .iter()
                .map(|m| (
                    m.member_id.clone(),
                    engine::group::classic::decode_subscription_topics(&m.subscription)
                ))
                .collect::<Vec<_>>()
        ),
        Some(V::OffsetCommit(o)) => format!("offset {}", o.offset),
        Some(other) => format!("{other:?}"),
    }
}

/// Replay one batch as a load would: a transactional batch's offsets stay pending for its
/// producer and a marker commits or aborts them (`replay_in_batch` on the bytes).
pub(super) fn replay_batch(c: &mut Coordinator, txn: Option<TxnWrite>, records: &[Record]) {
    match txn {
        None => records.iter().for_each(|r| c.replay(r)),
        Some(TxnWrite::Offsets {
            producer_id,
            producer_epoch,
        }) => {
            for r in records {
                let key = r.encode_key().expect("coordinator records encode");
                let value = r.encode_value().expect("coordinator records encode");
                c.replay_txn_record(producer_id, producer_epoch, &key, value.as_deref());
            }
        }
        Some(TxnWrite::Marker {
            producer_id,
            commit,
            ..
        }) => c.replay_marker(producer_id, commit),
    }
}

/// The ticker's next firing at or after `t`.
fn ceil_tick(t: i64) -> i64 {
    (t + TICK_MS - 1) / TICK_MS * TICK_MS
}

impl World {
    /// `partition.rs::load_partition`: the newest snapshot, then the log after it, then
    /// `on_loaded`. Records that do not decode are counted; the simulator treats any as a bug.
    pub(super) fn load_partition(
        &mut self,
        s: usize,
    ) -> std::io::Result<(Coordinator, PartitionLog<MemDir>)> {
        let slot = &self.slots[s];
        let mut c = Coordinator::new(slot.partition, self.p.gcfg.clone());
        c.member_ids = Some(engine::group::SeededIds::new(self.rng.next_u64()));
        let mut skipped = 0u64;
        let mut start = 0;
        if let Some(snap) = &slot.snapshot {
            for r in &snap.records {
                if !c.replay_bytes(&r.key, Some(&r.value)) {
                    skipped += 1;
                }
            }
            start = snap.offset + 1;
        }
        let result = block_on(PartitionLog::open_from_batches(
            slot.dir.clone(),
            self.p.log_cfg.clone(),
            start,
            |h, _, _, k, v| {
                if !c.replay_in_batch(h.attributes, h.producer_id, h.producer_epoch, k, v) {
                    skipped += 1;
                }
            },
        ));
        let (log, report) = result?;
        self.slots[s].last_report = Some(report);
        if skipped > 0 {
            self.fail(format!(
                "partition {s}: {skipped} records written by the coordinator did not decode"
            ));
        }
        c.on_loaded(self.now);
        Ok((c, log))
    }

    /// The first load of an empty disk at the start of the run.
    pub(super) fn load_at_start(&mut self, s: usize) {
        let (c, log) = self
            .load_partition(s)
            .expect("an empty, healthy in-memory disk loads");
        let slot = &mut self.slots[s];
        slot.shadow = c.clone();
        let mut core = PartitionCore::recovered(c, 0);
        core.set_max_queued_bytes(self.p.max_queued_bytes);
        slot.core = Some(core);
        slot.log = Some(log);
        slot.load = 1;
        self.schedule_tick(s);
    }

    pub(super) fn on_request(&mut self, m: ReqMsg) {
        if !self.broker_up || m.incarnation != self.incarnation {
            // Sent to a process that is gone: the connection was reset.
            self.stats.dropped += 1;
            return;
        }
        self.stats.requests += 1;
        let ghost = !self.clients[m.client].note_processed(m.corr);
        let s = self.groups[m.group].partition;
        let load = self.slots[s].load;
        let admitted = match self.slots[s].core_mut().admit() {
            Ok(()) if self.now < self.slots[s].loading_until => Err(Refusal::Loading),
            other => other,
        };
        if let Err(refusal) = admitted {
            if !ghost {
                let code = match refusal {
                    Refusal::Loading => ResponseError::CoordinatorLoadInProgress.code(),
                    Refusal::Unavailable => ResponseError::CoordinatorNotAvailable.code(),
                };
                self.send_reply(m.client, m.corr, Reply::Err(code), load);
            }
            return;
        }
        let id = self.next_req;
        self.next_req += 1;
        let kind = match &m.req {
            GroupRequest::OffsetCommit(r) => RouteKind::Commit(
                r.topics
                    .iter()
                    .flat_map(|t| {
                        t.partitions.iter().map(move |p| {
                            (t.name.to_string(), p.partition_index, p.committed_offset)
                        })
                    })
                    .collect(),
            ),
            GroupRequest::Sync(r) => RouteKind::Sync {
                generation: r.generation_id,
            },
            GroupRequest::Join(_) => RouteKind::Join,
            GroupRequest::ConsumerHeartbeat(r) => RouteKind::ConsumerHeartbeat {
                member: r.member_id.to_string(),
            },
            _ => RouteKind::Other,
        };
        self.routes.insert(
            id,
            Route {
                client: m.client,
                corr: m.corr,
                group: m.group,
                kind,
                ghost,
            },
        );
        let ctx = Arc::new(RequestContext {
            client_id: self.clients[m.client].client_id.clone(),
            client_host: "/10.0.0.1".into(),
            api_version: m.version,
            topics: self.topics.clone(),
            group_configs: Default::default(),
            topic_filter: None,
        });
        self.touched.insert(m.group);
        // As `PartitionCore::handle`: over its bound on queued bytes, the partition keeps the
        // request until a durable batch makes room (`resume`).
        let core = self.slots[s].core_mut();
        if core.must_wait() {
            core.defer(Deferred {
                id,
                ctx,
                req: m.req,
                tag: (),
            });
            self.stats.deferred += 1;
            self.trace(|| format!("p{s}: request {id} waits for room"));
            return;
        }
        self.run_request(s, id, &ctx, m.req);
    }

    /// Run a request on its partition's coordinator (on arrival, or once it has room).
    pub(super) fn run_request(
        &mut self,
        s: usize,
        id: ReqId,
        ctx: &RequestContext,
        req: GroupRequest,
    ) {
        let fetch_group = match &req {
            GroupRequest::OffsetFetch { group, .. } => Some(group.clone()),
            _ => None,
        };
        // The core's `handle` in two steps, so that the oracle sees the output before the
        // core releases any of it. Deadlines this request set fire at the next tick.
        let mut out = Output::default();
        {
            let c = self.slots[s]
                .coordinator_mut()
                .expect("an available partition has a coordinator");
            c.handle(id, ctx, req, self.now, &mut out);
        }
        self.after_handle(s, id, fetch_group.as_deref(), &out);
        self.deliver(s, out);
        self.schedule_tick(s);
    }

    /// The core's `deliver`: records first, then responses, each released only once every
    /// record produced before it in this partition is durable.
    pub(super) fn deliver(&mut self, s: usize, mut out: Output) {
        // The coordinator may list replies in hash-set order (members removed together); the
        // order does not matter to the broker, but the simulator must not depend on it.
        out.replies.sort_by_key(|(id, _)| *id);
        for r in &out.records {
            self.touch_record_group(r);
            if self.cfg.trace {
                let line = format!("p{s} record {:?} = {}", r.key, brief_value(&r.value));
                self.trace(|| line);
            }
        }
        let ready = self.slots[s].core_mut().deliver(out, ());
        self.kick_writer(s);
        self.release_all(s, ready);
        self.offload_assignments(s);
    }

    /// `PartitionTable::offload_assignments`: each target assignment the core emitted runs
    /// "elsewhere" and comes back after a drawn delay, while requests go on.
    fn offload_assignments(&mut self, s: usize) {
        for pending in self.slots[s].core_mut().take_assignments() {
            self.stats.assignments_offloaded += 1;
            let at = self.now + self.rng.range(0, self.p.assign_max_ms + 1);
            let inc = self.incarnation;
            self.push(
                at,
                Ev::Assigned {
                    p: s,
                    inc,
                    pending: Box::new(pending),
                },
            );
        }
    }

    /// The core's `assignment_done` in two steps, as for requests: the oracle sees the output
    /// first. A result for an earlier load of the partition, or one arriving while it is not
    /// serving, is dropped (the core's rule).
    pub(super) fn assignment_done(
        &mut self,
        s: usize,
        pending: engine::partition_core::PendingAssignment,
    ) {
        let done = pending.job.run();
        let serving = self.slots[s]
            .core
            .as_ref()
            .is_some_and(|c| c.phase() == Phase::Serving && c.generation() == pending.generation);
        if !serving {
            return;
        }
        let mut out = Output::default();
        self.slots[s]
            .coordinator_mut()
            .expect("a serving partition has a coordinator")
            .assignment_done(done, self.now, &mut out);
        if out.records.iter().any(|r| {
            matches!(
                r.key,
                wire::records::RecordKey::ConsumerGroupTargetAssignmentMetadata { .. }
            )
        }) {
            self.stats.assignments_written += 1;
        }
        self.after_handle(s, 0, None, &out);
        self.deliver(s, out);
        self.schedule_tick(s);
    }

    fn release_all(&mut self, s: usize, released: Vec<Released<()>>) {
        for r in released {
            self.release(s, r.id, r.response);
        }
    }

    fn touch_record_group(&mut self, r: &Record) {
        use wire::records::RecordKey as K;
        let g = match &r.key {
            K::OffsetCommit { group, .. }
            | K::GroupMetadata { group }
            | K::ConsumerGroupMetadata { group }
            | K::ConsumerGroupMemberMetadata { group, .. }
            | K::ConsumerGroupTargetAssignmentMetadata { group }
            | K::ConsumerGroupTargetAssignmentMember { group, .. }
            | K::ConsumerGroupCurrentMemberAssignment { group, .. }
            | K::ConsumerGroupRegularExpression { group, .. } => group,
            _ => return,
        };
        if let Some(i) = self.group_index(g) {
            self.touched.insert(i);
        }
    }

    pub(super) fn group_index(&self, name: &str) -> Option<usize> {
        name.strip_prefix("group-")
            .and_then(|n| n.parse::<usize>().ok())
            .filter(|i| *i < self.groups.len())
    }

    /// A response leaves the broker: the oracle learns what was acknowledged, then the network
    /// carries it.
    pub(super) fn release(&mut self, s: usize, id: ReqId, resp: GroupResponse) {
        let Some(route) = self.routes.remove(&id) else {
            return;
        };
        self.stats.responses += 1;
        self.touched.insert(route.group);
        self.on_release(s, id, &route, &resp);
        match (&route.kind, &resp) {
            (RouteKind::Marker { job }, GroupResponse::TxnMarker(code)) => {
                return self.txn_marker_reply(*job, s, *code);
            }
            (RouteKind::Marker { job }, _) => return self.txn_marker_reply(*job, s, -1),
            (RouteKind::TxnCommit { .. } | RouteKind::TxnFetch { .. }, _) => {
                let reply = super::txn::TxnReply::Group(Reply::Resp(resp));
                return self.txn_send_reply(route.client, route.corr, reply);
            }
            _ => {}
        }
        if !route.ghost {
            let load = self.slots[s].load;
            self.send_reply(route.client, route.corr, Reply::Resp(resp), load);
        }
    }

    fn kick_writer(&mut self, s: usize) {
        let slot = &mut self.slots[s];
        if slot.in_flight.is_none() && !slot.writer_scheduled && slot.pending_len() > 0 {
            slot.writer_scheduled = true;
            let inc = self.incarnation;
            // The writer task runs after the current request: records produced at this same
            // instant by other requests join the batch.
            self.push(self.now, Ev::WriterStart { p: s, inc });
        }
    }

    /// `log_writer`: take everything waiting (up to the batch limit) as one batch, hand it to
    /// the journal's next round at once, and start its segment write.
    pub(super) fn writer_start(&mut self, s: usize) {
        let now = self.now;
        let slot = &mut self.slots[s];
        slot.writer_scheduled = false;
        let Some(batch) = slot.core_mut().take_batch() else {
            return;
        };
        let log = slot.log.as_ref().expect("a writing partition has a log");
        let end = log.next_offset();
        let bytes = match prepare(log, &batch, now) {
            Ok(b) => b,
            Err(e) => {
                let failed = InFlight {
                    records: batch.records,
                    txn: batch.txn,
                    upto: batch.upto,
                    end,
                    bytes: None,
                    journaled: false,
                    epoch: self.journal.epoch,
                };
                return self.batch_failed(s, failed, e);
            }
        };
        let epoch = self.journal.epoch;
        *self.journal.writing.entry(epoch).or_default() += 1;
        self.journal_submit(s, batch.upto, end, bytes.clone());
        self.slots[s].in_flight = Some(InFlight {
            records: batch.records,
            txn: batch.txn,
            upto: batch.upto,
            end,
            bytes: Some(bytes),
            journaled: false,
            epoch,
        });
        let mut latency = self.rng.range(0, self.p.fsync_max_ms + 1);
        if self.rng.chance(0.01) {
            latency += self.rng.range(50, 400); // an occasional slow write
        }
        let inc = self.incarnation;
        self.push(self.now + latency, Ev::WriterDone { p: s, inc });
    }

    /// The segment write of the batch in flight completes (or fails).
    pub(super) fn writer_done(&mut self, s: usize) {
        let Some(bytes) = self.slots[s]
            .in_flight
            .as_mut()
            .and_then(|b| b.bytes.take())
        else {
            return;
        };
        let slot = &mut self.slots[s];
        let log = slot.log.as_mut().expect("a writing partition has a log");
        let result = block_on(log.append_prepared(bytes));
        let active = log.active_segment();
        if self.cfg.trace {
            let segs = self.slots[s].log.as_ref().map_or(0, |l| l.segment_count());
            let line = format!("p{s}: segment write -> {result:?} ({segs} segments)");
            self.trace(|| line);
        }
        let epoch = self.slots[s].in_flight.as_ref().expect("checked").epoch;
        self.end_segment_write(epoch, s, result.as_ref().ok().and(active));
        match result {
            Ok(_) => {
                if self.slots[s]
                    .in_flight
                    .as_ref()
                    .is_some_and(|b| b.journaled)
                {
                    let batch = self.slots[s].in_flight.take().expect("checked");
                    self.batch_durable(s, batch);
                }
            }
            Err(e) => {
                let batch = self.slots[s].in_flight.take().expect("checked");
                self.batch_failed(s, batch, e);
            }
        }
    }

    /// The batch's journal round is durable: release what waited for it.
    pub(super) fn batch_durable(&mut self, s: usize, batch: InFlight) {
        self.stats.batches += 1;
        self.stats.records += batch.records.len() as u64;
        let slot = &mut self.slots[s];
        // Every earlier batch is now something acknowledged responses rely on: a batch left on
        // disk by a failed append, then this one.
        for (txn, b) in std::mem::take(&mut slot.tail) {
            replay_batch(&mut slot.shadow, txn, &b);
        }
        replay_batch(&mut slot.shadow, batch.txn, &batch.records);
        let released = self.slots[s].core_mut().batch_durable(batch.upto);
        self.release_all(s, released);
        self.resume(s);
        if self.slots[s].pending_len() == 0 {
            self.maybe_snapshot(s);
            self.compaction_slice(s);
        } else {
            self.writer_start(s);
        }
    }

    /// `PartitionTable::resume`: the requests that waited for room run, in arrival order, while
    /// the partition has room.
    fn resume(&mut self, s: usize) {
        while let Some(d) = self.slots[s].core_mut().next_runnable() {
            self.trace(|| format!("p{s}: request {} runs after waiting for room", d.id));
            self.run_request(s, d.id, &d.ctx, d.req);
        }
    }

    /// The segment write or the journal round failed: fail what waited, cut and reload.
    pub(super) fn batch_failed(&mut self, s: usize, batch: InFlight, e: std::io::Error) {
        if batch.bytes.is_some() {
            // Its segment write never runs now: a checkpoint must not wait for it.
            self.end_segment_write(batch.epoch, s, None);
        }
        self.stats.failed_writes += 1;
        self.trace(|| format!("p{s}: write failed ({e}); failing waiting requests"));
        // The batch may have reached the file (or the journal) without its sync: the reload
        // cuts it, and journals the cut.
        let failed = self.slots[s].core_mut().batch_failed(batch.end);
        self.release_all(s, failed);
        self.slots[s].tail.push((batch.txn, batch.records));
        self.slots[s].log = None;
        self.slots[s].compaction = None;
        self.try_reload(s);
    }

    /// `reload_until_ok`: reload from disk, retrying every second while it fails.
    pub(super) fn try_reload(&mut self, s: usize) {
        let cut = match self.slots[s].core_mut().discard_from() {
            Some(end) => block_on(storage::log::discard_unacknowledged(
                &self.slots[s].dir,
                &self.p.log_cfg,
                end,
            ))
            .map(|_| ()),
            None => Ok(()),
        };
        let end = self.slots[s].core_mut().discard_from();
        let loaded = cut.and_then(|()| self.load_partition(s)).and_then(|l| {
            // The cut is journaled before the partition serves again.
            match end {
                Some(end) => self.journal_cut(s, end).map(|()| l),
                None => Ok(l),
            }
        });
        match loaded {
            Ok((c, log)) => {
                self.stats.reloads += 1;
                self.trace(|| format!("p{s}: reloaded after a failed write"));
                self.slots[s].core_mut().reloaded(c);
                self.slots[s].log = Some(log);
                self.after_load(s, false);
                self.resume(s);
                self.schedule_tick(s);
                self.kick_writer(s);
            }
            Err(e) => {
                self.trace(|| format!("p{s}: reload failed ({e}); retrying in 1 s"));
                let inc = self.incarnation;
                self.push(self.now + 1000, Ev::ReloadRetry { p: s, inc });
            }
        }
    }

    /// `log_writer` after its loop: nothing pending, so the coordinator's state is exactly the
    /// log's — the moment to snapshot once enough records have accumulated.
    fn maybe_snapshot(&mut self, s: usize) {
        let budget = self.p.snapshot_slice_records;
        let slot = &mut self.slots[s];
        let log_end = slot
            .log
            .as_ref()
            .expect("a writing partition has a log")
            .next_offset();
        // One slice now, if one is due: the core asserts nothing is pending, so the
        // coordinator's state is durable; requests handled before the next slice change it (the
        // snapshot is fuzzy, as in the broker).
        let Some(b) = slot
            .core_mut()
            .snapshot_slice(log_end, budget)
            .expect("snapshot records encode")
        else {
            return;
        };
        let covered = b.covered;
        // Written atomically at once (the broker's file task: tmp + fsync + rename).
        slot.snapshot = Some(Snap {
            offset: covered,
            records: b.into_records(),
        });
        slot.core_mut().snapshot_written();
        // What the snapshot covers is durable now, whatever the log's fsyncs did.
        for (txn, b) in std::mem::take(&mut slot.tail) {
            replay_batch(&mut slot.shadow, txn, &b);
        }
        // A failure here only leaves redundant segments behind (logged as a warning).
        let log = slot.log.as_mut().expect("a writing partition has a log");
        let _ = block_on(log.remove_segments_before(covered + 1));
        self.stats.snapshots += 1;
        self.trace(|| format!("p{s}: snapshot at offset {covered}"));
    }

    /// `log_writer`'s compaction: a pass starts when the core says one is due (after a roll,
    /// or when a kept tombstone has expired) and advances one slice whenever the writer has
    /// nothing pending.
    fn compaction_slice(&mut self, s: usize) {
        let now = self.now;
        let retention = self.p.gcfg.delete_retention_ms;
        let slice_bytes = self.p.compaction_slice_bytes;
        let slot = &mut self.slots[s];
        let snapshot = slot.snapshot.as_ref().map(|x| x.offset);
        let Some(log) = slot.log.as_mut() else {
            return;
        };
        let core = slot.core.as_mut().expect("a writing partition has a core");
        let rolls = log.rolls();
        if core.compaction_due(rolls, now) {
            slot.compaction = log.start_compaction(
                storage::compact::CompactConfig {
                    delete_retention_ms: retention,
                    slice_bytes,
                },
                now,
                snapshot,
            );
            core.compaction_started(rolls, slot.compaction.is_some());
        }
        let Some(c) = slot.compaction.as_mut() else {
            return;
        };
        match block_on(log.compact_slice(c)) {
            Ok(false) => {}
            Ok(true) => {
                core.compaction_ended(c.stats.next_tombstone_expiry);
                let st = c.stats.clone();
                slot.compaction = None;
                self.stats.compactions += 1;
                self.trace(|| format!("p{s}: compaction pass done: {st:?}"));
            }
            Err(e) => {
                core.compaction_ended(None);
                slot.compaction = None;
                self.trace(|| format!("p{s}: compaction pass abandoned ({e})"));
            }
        }
    }

    pub(super) fn schedule_tick(&mut self, s: usize) {
        let Some(d) = self.slots[s].core.as_ref().and_then(|c| c.next_deadline()) else {
            return;
        };
        let at = ceil_tick(d.max(self.now + 1));
        if self.slots[s].tick_at.is_none_or(|t| at < t) {
            self.slots[s].tick_at = Some(at);
            let inc = self.incarnation;
            self.push(at, Ev::Tick { p: s, inc });
        }
    }

    /// The 5 ms ticker (`PartitionTable::tick`): fire due deadlines of an available partition.
    pub(super) fn on_tick(&mut self, s: usize) {
        if self.slots[s].tick_at != Some(self.now) {
            return; // superseded by an earlier tick
        }
        self.slots[s].tick_at = None;
        let slot = &mut self.slots[s];
        if !slot.available() || self.now < slot.loading_until {
            let inc = self.incarnation;
            if slot.available() {
                let at = ceil_tick(slot.loading_until);
                slot.tick_at = Some(at);
                self.push(at, Ev::Tick { p: s, inc });
            }
            return;
        }
        // The core's `tick` in two steps, as for requests: the oracle sees the output first.
        let mut out = Output::default();
        if let Some(c) = slot.coordinator_mut() {
            if c.next_deadline().is_some_and(|d| d <= self.now) {
                c.tick(self.now, &mut out);
            }
        }
        // Groups the tick changed show up in its records and replies (`deliver`, `release`);
        // a classic member removed without a record can only shrink what is checked.
        self.after_handle(s, 0, None, &out);
        self.deliver(s, out);
        // A snapshot build also advances while the partition is idle, as the writer does.
        let building = self.slots[s]
            .core
            .as_ref()
            .is_some_and(|c| c.snapshot_building());
        if building && self.quiescent(s) {
            self.maybe_snapshot(s);
        }
        self.schedule_tick(s);
    }

    /// A disk starts failing: every operation after the next few fails, until healed.
    pub(super) fn disk_fault(&mut self, s: usize) {
        if !self.broker_up || self.slots[s].disk_failing {
            return;
        }
        self.stats.disk_faults += 1;
        let ops = self.rng.below(6);
        self.slots[s].dir.fail_after(ops);
        self.slots[s].disk_failing = true;
        let heal = self.rng.range(1, self.p.heal_max_ms + 1);
        let inc = self.incarnation;
        self.push(self.now + heal, Ev::DiskHeal { p: s, inc });
        self.trace(|| format!("p{s}: disk fails after {ops} more operations"));
    }

    pub(super) fn disk_heal(&mut self, s: usize) {
        self.slots[s].dir.heal();
        self.slots[s].disk_failing = false;
    }

    /// Power loss: every partition's unsynced bytes are torn at a random point (a batch in
    /// flight may have been cut after any of its I/O operations), memory is gone, and every
    /// connection is reset.
    pub(super) fn crash(&mut self) {
        self.stats.broker_crashes += 1;
        self.trace(|| "broker crash".into());
        // The journal round in flight (it reads the batches it carries) and the checkpoint.
        self.journal_crash();
        self.txn_crash();
        for s in 0..self.slots.len() {
            if self.slots[s].compaction.is_some() && self.rng.chance(0.5) {
                // A compaction slice was under way: cut it after a random number of its
                // operations (a segment being rewritten, renamed or removed).
                let ops = self.rng.below(8);
                self.slots[s].dir.fail_after(ops);
                let slot = &mut self.slots[s];
                if let (Some(log), Some(c)) = (slot.log.as_mut(), slot.compaction.as_mut()) {
                    let _ = block_on(log.compact_slice(c));
                }
            }
            self.slots[s].compaction = None;
            if let Some(batch) = self.slots[s].in_flight.take() {
                if let Some(bytes) = batch.bytes {
                    // The segment write was under way: cut it after a random number of its
                    // operations.
                    let ops = self.rng.below(6);
                    self.slots[s].dir.fail_after(ops);
                    if let Some(log) = self.slots[s].log.as_mut() {
                        let _ = block_on(log.append_prepared(bytes));
                    }
                }
                self.slots[s].tail.push((batch.txn, batch.records));
            }
            let mode = self.rng.below(4);
            let mut rng = self.rng.clone();
            self.slots[s].dir.crash(|_, unsynced| match mode {
                0 => 0,
                1 => unsynced,
                _ => rng.below(unsynced as u64 + 1) as usize,
            });
            self.rng = rng;
            let slot = &mut self.slots[s];
            // The process is gone, and the core with it.
            slot.core = None;
            slot.log = None;
            slot.writer_scheduled = false;
            slot.disk_failing = false;
            slot.tick_at = None;
        }
        // Responses that were waiting die with the process.
        self.routes.clear();
        self.broker_up = false;
        self.incarnation += 1;
        let down = self.rng.range(1, self.p.down_max_ms + 1);
        self.push(self.now + down, Ev::Restart);
        for g in 0..self.groups.len() {
            self.touched.insert(g);
        }
    }

    /// The process starts again: every partition loads from its disk (and is "loading" for a
    /// moment, answering COORDINATOR_LOAD_IN_PROGRESS).
    pub(super) fn restart(&mut self) {
        self.broker_up = true;
        self.trace(|| "broker restart".into());
        self.journal_recover_and_start();
        for s in 0..self.slots.len() {
            match self.load_partition(s) {
                Ok((c, log)) => {
                    // As `PartitionTable::open_logs`: the count toward the next snapshot starts
                    // from the records after the newest one.
                    let covered = self.slots[s].snapshot.as_ref().map_or(0, |x| x.offset + 1);
                    let since_snapshot = log.next_offset().saturating_sub(covered);
                    let mut core = PartitionCore::recovered(c, since_snapshot);
                    core.set_max_queued_bytes(self.p.max_queued_bytes);
                    self.slots[s].core = Some(core);
                    self.slots[s].log = Some(log);
                    self.slots[s].loading_until = self.now + self.rng.range(0, 300);
                    self.after_load(s, true);
                    self.schedule_tick(s);
                }
                Err(e) => {
                    // A crash heals the disk, so loading cannot fail on I/O here.
                    self.fail(format!("partition {s} failed to load after a restart: {e}"));
                }
            }
        }
        self.txn_load();
        for g in 0..self.groups.len() {
            self.touched.insert(g);
        }
    }

    /// Whether the partition is quiet: nothing pending or in flight, no fault armed, loaded.
    pub(super) fn quiescent(&self, s: usize) -> bool {
        let slot = &self.slots[s];
        self.broker_up
            && slot.core.as_ref().is_some_and(|c| c.quiescent())
            && slot.in_flight.is_none()
            && !slot.writer_scheduled
            && !slot.disk_failing
    }
}
