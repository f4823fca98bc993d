//! A replicated `__consumer_offsets` partition: the partition core runs on the leader only, and
//! "durable" means "committed by a majority" (Kafka's high-watermark rule for coordinator
//! writes).
//!
//! This is the seam `coordinator::partition_core` was built for: its writer protocol (take a
//! batch, report it durable or failed) is driven here by Raft instead of by one disk. A batch the
//! core hands out is encoded as the Kafka record batch Ringleader writes to its segment logs and
//! proposed as one Raft entry; the core hears `batch_durable` when that entry commits. A replica
//! that becomes leader waits until the first entry of its term commits (then every earlier
//! entry is committed too, Raft §5.4.2), replays the committed log into a fresh coordinator
//! and serves; until then requests get COORDINATOR_LOAD_IN_PROGRESS. A replica that stops being
//! leader fails what waited with NOT_COORDINATOR (as a failed coordinator write is answered)
//! and drops its groups; clients find the new coordinator through FindCoordinator.
//!
//! Log compaction: every replica (leader or not) keeps the partition's records as Kafka's
//! log compaction would leave them — the latest value of each key, in the order of its last
//! write ([`Compacted`]) — from the entries committed on it. Once the entries applied since the
//! last snapshot outweigh that state (and at least `snapshot_min_bytes`), the partition hands
//! the shell a snapshot: those records as record batches. The shell makes it durable and calls
//! [`ReplicatedPartition::compacted`], which drops the entries it covers; a follower too far
//! behind is sent it instead of entries, and a new leader loads from it plus the entries after.
//! So a replica's log, in memory and on disk, stays within about twice the partition's live
//! state. A transactional or control batch (not written on a cluster today: transactions are
//! not served there) turns compaction off for the replica's lifetime rather than guess how a
//! snapshot should keep an open transaction.
//!
//! Must not: touch a file, a socket or a clock (as the rest of the crate). The entries' base
//! offsets are 0: the shell that writes committed entries into a segment log gives them their
//! log offsets.

use crate::{AfterPersist, LogSnapshot, NodeId, ProposeError, Replica, Role, Work};
use coordinator::group::{Coordinator, GroupConfig, GroupRequest, ReqId, RequestContext};
use coordinator::partition_core::{encode_batch, Deferred, PartitionCore, Released};
use std::collections::HashMap;
use std::sync::Arc;
use storage::batch::{encode_batch_as, for_each_record, peek_batch, BatchProducer, Peek};
use storage::log::pair_refs;

/// Why a request cannot run on this replica now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NotServing {
    /// Not the leader: NOT_COORDINATOR, and the client looks the coordinator up again.
    NotCoordinator { leader: Option<NodeId> },
    /// The leader is replaying the log: COORDINATOR_LOAD_IN_PROGRESS, the client retries.
    Loading,
}

/// The largest record batch one entry carries (the core's batches stay far below it).
const MAX_ENTRY_BYTES: usize = 8 << 20;

/// What the partition hands back after the shell's durable write: messages to send, replies
/// that may leave, and requests that were waiting (deferred by the core's memory bound) when
/// this replica stopped leading, which the shell answers NOT_COORDINATOR.
#[derive(Debug)]
pub struct Progress<T> {
    pub send: Vec<crate::eraftpb::Message>,
    pub released: Vec<Released<T>>,
    pub refused: Vec<Deferred<T>>,
    /// A snapshot for the shell to make durable, then report with
    /// [`ReplicatedPartition::compacted`].
    pub snapshot: Option<LogSnapshot>,
}

/// Entries applied since the last snapshot must weigh at least this much before the next one
/// (and at least the live state itself, so a snapshot's cost is spread over as many bytes of
/// log): 4 MiB, so a node's 50 partitions hold at most about 200 MiB of log beyond their
/// live state.
pub const SNAPSHOT_MIN_BYTES: usize = 4 << 20;

/// The largest snapshot sent to a follower: a partition whose live state outgrows it keeps
/// its whole log instead (`engine::runtime::peers` bounds a frame by it).
pub const MAX_SNAPSHOT_BYTES: usize = 64 << 20;

/// Records per batch in a snapshot.
const SNAPSHOT_BATCH_RECORDS: usize = 4096;

/// A partition's records as Kafka's log compaction would keep them: the latest value of each
/// key, in the order of its last write; a tombstone removes its key. Built alike on every
/// replica from the committed entries, so any replica can write a snapshot.
#[derive(Debug, Default)]
pub struct Compacted {
    live: HashMap<Vec<u8>, (u64, Vec<u8>)>,
    next_seq: u64,
    /// Bytes of the live keys and values.
    bytes: usize,
    /// A transactional or control batch was applied: no snapshot from now on.
    unsupported: bool,
}

impl Compacted {
    /// Apply one committed entry's batch. `Err` for bytes that are not one whole batch.
    pub fn apply(&mut self, data: &[u8]) -> Result<(), String> {
        let h = match peek_batch(data, 0, MAX_ENTRY_BYTES) {
            Ok(Peek::Batch(h)) => h,
            Ok(Peek::Incomplete { needed }) => {
                return Err(format!("{} bytes of a batch of {needed}", data.len()))
            }
            Err(e) => return Err(e.to_string()),
        };
        if h.is_transactional() || h.is_control() {
            self.unsupported = true;
        }
        for_each_record(data, &h, 0, |_, _, k, v| {
            let Some(k) = k else { return };
            let seq = self.next_seq;
            self.next_seq += 1;
            match v {
                Some(v) => {
                    self.bytes += k.len() + v.len();
                    if let Some((_, old)) = self.live.insert(k.to_vec(), (seq, v.to_vec())) {
                        self.bytes -= k.len() + old.len();
                    }
                }
                None => {
                    if let Some((_, old)) = self.live.remove(k) {
                        self.bytes -= k.len() + old.len();
                    }
                }
            }
        })
        .map_err(|e| e.to_string())
    }

    /// Every batch of `data` (a snapshot's), in order.
    pub fn apply_all(&mut self, data: &[u8]) -> Result<(), String> {
        for batch in batches(data)? {
            self.apply(batch)?;
        }
        Ok(())
    }

    /// The state a snapshot of `partition` (written by one of its replicas) holds. Panics on
    /// one that does not decode: it was made durable or sent by a replica of this partition.
    fn from_snapshot(partition: i32, data: &[u8]) -> Self {
        let mut c = Compacted::default();
        c.apply_all(data).unwrap_or_else(|e| {
            panic!("partition {partition}: a Raft snapshot does not decode: {e}")
        });
        c
    }

    /// Bytes of the live keys and values.
    pub fn bytes(&self) -> usize {
        self.bytes
    }

    pub fn len(&self) -> usize {
        self.live.len()
    }

    pub fn is_empty(&self) -> bool {
        self.live.is_empty()
    }

    /// The live records as record batches, in the order of their last write (what a compacted
    /// Kafka log holds, and what the coordinator replays); empty when nothing is live.
    pub fn encode(&self, now: i64) -> Vec<u8> {
        let mut recs: Vec<(&u64, &Vec<u8>, &Vec<u8>)> =
            self.live.iter().map(|(k, (s, v))| (s, k, v)).collect();
        recs.sort_unstable_by_key(|r| *r.0);
        let mut out = Vec::with_capacity(self.bytes + recs.len() * 16);
        for chunk in recs.chunks(SNAPSHOT_BATCH_RECORDS) {
            let records: Vec<_> = chunk
                .iter()
                .map(|(_, k, v)| (Some(k.as_slice()), Some(v.as_slice())))
                .collect();
            encode_batch_as(0, now, BatchProducer::NONE, &records, &mut out);
        }
        out
    }
}

/// The batches of `data` one after another (a snapshot's encoding).
fn batches(data: &[u8]) -> Result<Vec<&[u8]>, String> {
    let mut out = Vec::new();
    let mut pos = 0;
    while pos < data.len() {
        match peek_batch(&data[pos..], pos as u64, MAX_ENTRY_BYTES) {
            Ok(Peek::Batch(h)) => {
                out.push(&data[pos..pos + h.size]);
                pos += h.size;
            }
            Ok(Peek::Incomplete { needed }) => {
                return Err(format!("snapshot cut at {pos}: a batch of {needed} bytes"))
            }
            Err(e) => return Err(e.to_string()),
        }
    }
    Ok(out)
}

pub struct ReplicatedPartition<T> {
    partition: i32,
    config: GroupConfig,
    replica: Replica,
    /// Some while this replica leads and has loaded the partition.
    core: Option<PartitionCore<T>>,
    /// Leading, not loaded yet: loads once the commit index reaches this index.
    load_at: Option<u64>,
    /// The batch proposed and not yet committed: (its entry's index and term, the core's
    /// `upto`).
    in_flight: Option<(u64, u64, u64)>,
    /// The term this replica leads (loading or loaded), if it leads.
    led_term: Option<u64>,
    /// The shell's clock at the last call, for loading and proposing between requests.
    now: i64,
    /// The committed records, compacted: what the next snapshot holds.
    compacted: Compacted,
    /// Bytes of entries applied since the last snapshot.
    since_snapshot: usize,
    /// A snapshot handed to the shell and not yet reported durable.
    snapshotting: bool,
    snapshot_min_bytes: usize,
}

impl<T> std::fmt::Debug for ReplicatedPartition<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ReplicatedPartition")
            .field("partition", &self.partition)
            .field("replica", &self.replica)
            .field("loaded", &self.core.is_some())
            .field("in_flight", &self.in_flight)
            .finish()
    }
}

impl<T: Clone> ReplicatedPartition<T> {
    /// A partition over `replica` (new, or restarted from its durable log and snapshot); a
    /// snapshot is due once `snapshot_min_bytes` of entries (and at least the live state)
    /// were applied since the last one ([`SNAPSHOT_MIN_BYTES`] in the broker).
    pub fn new(
        partition: i32,
        config: GroupConfig,
        replica: Replica,
        snapshot_min_bytes: usize,
    ) -> Self {
        // Committed entries after the snapshot are handed out again from its index on.
        let compacted = match replica.log().snapshot_data() {
            Some(data) => Compacted::from_snapshot(partition, data),
            None => Compacted::default(),
        };
        ReplicatedPartition {
            partition,
            config,
            replica,
            core: None,
            load_at: None,
            in_flight: None,
            led_term: None,
            now: 0,
            compacted,
            since_snapshot: 0,
            snapshotting: false,
            snapshot_min_bytes,
        }
    }

    /// The shell made `snapshot` (from [`Progress::snapshot`]) durable: the log drops what it
    /// covers.
    pub fn compacted(&mut self, snapshot: LogSnapshot) {
        assert!(self.snapshotting, "a snapshot nobody asked for");
        self.snapshotting = false;
        self.replica.compact(snapshot.index, snapshot.data);
    }

    fn apply_committed(&mut self, e: &crate::eraftpb::Entry) {
        if let Err(why) = self.compacted.apply(&e.data) {
            panic!(
                "partition {}: committed entry {} is not a record batch: {why}",
                self.partition, e.index
            );
        }
        self.since_snapshot += e.data.len();
    }

    /// A snapshot, if one is due: everything applied, compacted, once the log since the last
    /// one outweighs it, or at once when a member added since the last one needs it
    /// (`Replica::snapshot_wanted`).
    fn maybe_snapshot(&mut self) -> Option<LogSnapshot> {
        let index = self.replica.applied_index();
        if self.snapshotting
            || self.compacted.unsupported
            || index <= self.replica.snapshot_index()
            || (self.since_snapshot < self.snapshot_min_bytes.max(self.compacted.bytes())
                && !self.replica.snapshot_wanted())
            || self.compacted.bytes() > MAX_SNAPSHOT_BYTES
        {
            return None;
        }
        let data = self.compacted.encode(self.now);
        if data.len() > MAX_SNAPSHOT_BYTES {
            return None;
        }
        self.snapshotting = true;
        self.since_snapshot = 0;
        Some(LogSnapshot {
            index,
            term: self.replica.term_at(index),
            data,
            conf: Some(self.replica.conf_at(index)),
        })
    }

    pub fn replica(&self) -> &Replica {
        &self.replica
    }

    /// Ticks and peer messages go straight to the replica; their effects come out of
    /// [`ReplicatedPartition::work`].
    pub fn replica_mut(&mut self) -> &mut Replica {
        &mut self.replica
    }

    pub fn role(&self) -> Role {
        self.replica.role()
    }

    /// This replica answers as the partition's coordinator at `mono` (see
    /// [`ReplicatedPartition::handle`]): loaded and holding the lease.
    pub fn serving(&self, mono: i64) -> bool {
        self.core.is_some() && self.replica.holds_lease(mono)
    }

    /// The coordinator, while this replica has the partition loaded as its leader.
    pub fn coordinator(&self) -> Option<&Coordinator> {
        self.core.as_ref().map(|c| c.coordinator())
    }

    /// Run a group request, if this replica is the partition's loaded leader holding its lease
    /// at `mono` (the clock [`Replica::tick`] is given: monotonic, in ms). `now` is the
    /// coordinator's clock (wall-clock ms, Kafka's timestamps). Replies that may leave now are
    /// returned; the others leave from [`ReplicatedPartition::persisted`] once their records are
    /// committed.
    pub fn handle(
        &mut self,
        id: ReqId,
        ctx: &Arc<RequestContext>,
        req: GroupRequest,
        now: i64,
        mono: i64,
        tag: T,
    ) -> Result<Vec<Released<T>>, NotServing> {
        self.now = now;
        let Some(core) = self.core.as_mut() else {
            return Err(if self.load_at.is_some() {
                NotServing::Loading
            } else {
                NotServing::NotCoordinator {
                    leader: self.replica.role().leader,
                }
            });
        };
        if !self.replica.holds_lease(mono) {
            // Loaded, but a majority has not confirmed this leadership lately: another replica
            // may be leader by now. The client looks the coordinator up again.
            return Err(NotServing::NotCoordinator { leader: None });
        }
        let mut out = core.handle(id, ctx, req, now, tag);
        out.extend(self.propose());
        Ok(out)
    }

    /// Fire the coordinator's deadlines (session expiry and the rest) due at `now`.
    pub fn tick(&mut self, now: i64, tag: T) -> Vec<Released<T>> {
        self.now = now;
        let Some(core) = self.core.as_mut() else {
            return Vec::new();
        };
        if core.next_deadline().is_none_or(|d| d > now) {
            return Vec::new();
        }
        let mut out = core.tick(now, tag);
        out.extend(self.propose());
        out
    }

    /// Propose the core's next batch if none is in flight.
    fn propose(&mut self) -> Vec<Released<T>> {
        let Some(core) = self.core.as_mut() else {
            return Vec::new();
        };
        if self.in_flight.is_some() {
            return Vec::new();
        }
        let Some(batch) = core.take_batch() else {
            return Vec::new();
        };
        let encoded = encode_batch(&batch).expect("the coordinator's records encode");
        let mut data = Vec::new();
        // A transaction marker comes as its control record, so every batch holds a record.
        assert!(
            !encoded.records.is_empty(),
            "take_batch hands out only non-empty batches"
        );
        let producer = BatchProducer::coordinator(
            encoded.attributes,
            encoded.producer_id,
            encoded.producer_epoch,
        );
        encode_batch_as(
            0,
            self.now,
            producer,
            &pair_refs(&encoded.records),
            &mut data,
        );
        match self.replica.propose(data) {
            Ok(index) => {
                // The entry carries the term raft-rs is in: the term this replica leads.
                let term = self.replica.term();
                debug_assert_eq!(Some(term), self.led_term);
                self.in_flight = Some((index, term, batch.upto));
                Vec::new()
            }
            Err(ProposeError::NotLeader { .. }) | Err(ProposeError::Dropped) => {
                // Leadership is going: nothing behind this batch may be acknowledged.
                let failed = core.batch_failed(0);
                self.core = None;
                self.led_term = None;
                failed
            }
        }
    }

    /// The next piece of work for the shell: see [`crate::Work`].
    pub fn work(&mut self) -> Option<Work> {
        self.replica.work()
    }

    /// The shell made `work` durable: carry out what follows — committed batches release their
    /// replies, a role change loads or drops the coordinator.
    pub fn persisted(&mut self, work: Work) -> Progress<T> {
        let AfterPersist { send, committed } = self.replica.persisted(&work);
        let mut progress = Progress {
            send,
            released: Vec::new(),
            refused: Vec::new(),
            snapshot: None,
        };
        if let Some(s) = &work.snapshot {
            // A leader's snapshot replaced this replica's log: its state too.
            self.compacted = Compacted::from_snapshot(self.partition, &s.data);
            self.since_snapshot = 0;
        }
        // Committed entries first: an entry of ours that committed is acknowledged even if this
        // replica lost leadership in the same step (it is on a majority). Ours means same index
        // and same term (Raft's log matching): a later leader may have put another entry at
        // our index.
        for e in work.committed.iter().chain(committed.iter()) {
            self.apply_committed(e);
            if let Some((index, term, upto)) = self.in_flight {
                if e.index == index && e.term == term {
                    self.in_flight = None;
                    let core = self
                        .core
                        .as_mut()
                        .expect("a batch in flight belongs to a core");
                    progress.released.extend(core.batch_durable(upto));
                }
            }
        }
        if let Some(role) = work.role {
            self.role_changed(role, &mut progress);
        }
        if self
            .load_at
            .is_some_and(|at| self.replica.commit_index() >= at)
        {
            self.load();
        }
        progress.released.extend(self.propose());
        progress.snapshot = self.maybe_snapshot();
        progress
    }

    fn role_changed(&mut self, role: Role, progress: &mut Progress<T>) {
        if role.is_leader && self.led_term == Some(role.term) {
            return;
        }
        // Whatever this replica led before (an earlier term, if two changes fell between two
        // calls) is over.
        self.step_down(progress);
        if role.is_leader {
            // raft-rs appended this term's empty entry when it won: once that commits, every
            // entry before it is committed.
            self.led_term = Some(role.term);
            self.load_at = Some(self.replica.last_index());
        }
    }

    fn step_down(&mut self, progress: &mut Progress<T>) {
        self.led_term = None;
        self.load_at = None;
        if let Some(mut core) = self.core.take() {
            if self.in_flight.take().is_some() {
                progress.released.extend(core.batch_failed(0));
            }
            assert_eq!(
                core.parked_len(),
                0,
                "only a batch in flight has replies parked behind it"
            );
            while let Some(d) = core.next_runnable() {
                progress.refused.push(d);
            }
        }
    }

    /// Replay every committed entry into a fresh coordinator and serve.
    fn load(&mut self) {
        self.load_at = None;
        let mut c = Coordinator::new(self.partition, self.config.clone());
        let commit = self.replica.commit_index();
        let mut records = 0u64;
        let log = self.replica.log();
        let from_snapshot = match log.snapshot_data() {
            Some(data) => batches(data).unwrap_or_else(|e| {
                panic!(
                    "partition {}: the snapshot does not decode: {e}",
                    self.partition
                )
            }),
            None => Vec::new(),
        };
        let from_log = log
            .entries()
            .iter()
            // Configuration changes (a node removed, `Replica::follow_members`) are Raft's,
            // not the coordinator's: only data entries hold record batches.
            .filter(|e| e.index <= commit && crate::is_data(e))
            .map(|e| &e.data[..]);
        for data in from_snapshot.into_iter().chain(from_log) {
            let Ok(Peek::Batch(h)) = peek_batch(data, 0, MAX_ENTRY_BYTES) else {
                panic!(
                    "partition {}: a committed entry is not a record batch",
                    self.partition
                )
            };
            for_each_record(data, &h, 0, |_, _, k, v| {
                let ok = c.replay_in_batch(h.attributes, h.producer_id, h.producer_epoch, k, v);
                assert!(
                    ok,
                    "partition {}: a committed record does not decode",
                    self.partition
                );
                records += 1;
            })
            .expect("a committed batch is whole");
        }
        // As a single node's load ends: every loaded member's session starts now (Kafka's
        // `onLoaded`), or a member whose client died with the old leader would keep its
        // partitions forever.
        c.on_loaded(self.now);
        self.core = Some(PartitionCore::recovered(c, records));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    type Rec<'a> = (&'a [u8], Option<&'a [u8]>);

    fn batch(records: &[Rec<'_>]) -> Vec<u8> {
        let recs: Vec<_> = records.iter().map(|(k, v)| (Some(*k), *v)).collect();
        let mut out = Vec::new();
        encode_batch_as(0, 7, BatchProducer::NONE, &recs, &mut out);
        out
    }

    fn records(data: &[u8]) -> Vec<(Vec<u8>, Option<Vec<u8>>)> {
        let mut out = Vec::new();
        for b in batches(data).unwrap() {
            let Ok(Peek::Batch(h)) = peek_batch(b, 0, MAX_ENTRY_BYTES) else {
                panic!()
            };
            for_each_record(b, &h, 0, |_, _, k, v| {
                out.push((k.unwrap().to_vec(), v.map(<[u8]>::to_vec)))
            })
            .unwrap();
        }
        out
    }

    #[test]
    fn keeps_the_latest_value_of_each_key_in_the_order_of_its_last_write() {
        let mut c = Compacted::default();
        c.apply(&batch(&[(b"a", Some(b"1")), (b"b", Some(b"2"))]))
            .unwrap();
        c.apply(&batch(&[
            (b"c", Some(b"3")),
            (b"a", Some(b"4")),
            (b"b", None),
        ]))
        .unwrap();
        assert_eq!(c.len(), 2);
        assert_eq!(c.bytes(), 4);
        let snap = c.encode(0);
        assert_eq!(
            records(&snap),
            vec![
                (b"c".to_vec(), Some(b"3".to_vec())),
                (b"a".to_vec(), Some(b"4".to_vec()))
            ]
        );
        // A snapshot applied to an empty state gives the same state back.
        let mut d = Compacted::default();
        d.apply_all(&snap).unwrap();
        assert_eq!(d.encode(0), snap);
        assert_eq!(d.bytes(), c.bytes());
    }

    #[test]
    fn a_large_state_spans_several_batches_and_garbage_is_an_error() {
        let mut c = Compacted::default();
        for i in 0..(SNAPSHOT_BATCH_RECORDS + 10) {
            let k = format!("k{i}");
            c.apply(&batch(&[(k.as_bytes(), Some(b"v"))])).unwrap();
        }
        let snap = c.encode(0);
        assert_eq!(batches(&snap).unwrap().len(), 2);
        assert_eq!(records(&snap).len(), SNAPSHOT_BATCH_RECORDS + 10);
        assert!(Compacted::default()
            .apply_all(&snap[..snap.len() - 1])
            .is_err());
        assert!(Compacted::default()
            .apply(b"not a batch at all, just bytes of text")
            .is_err());
    }
}
