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
//! Must not: touch a file, a socket or a clock (as the rest of the crate). The entries' base
//! offsets are 0: the shell that writes committed entries into a segment log gives them their
//! log offsets.

use crate::{AfterPersist, NodeId, ProposeError, Replica, Role, Work};
use coordinator::group::{Coordinator, GroupConfig, GroupRequest, ReqId, RequestContext};
use coordinator::partition_core::{encode_batch, Deferred, PartitionCore, Released};
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
    pub fn new(partition: i32, config: GroupConfig, replica: Replica) -> Self {
        ReplicatedPartition {
            partition,
            config,
            replica,
            core: None,
            load_at: None,
            in_flight: None,
            led_term: None,
            now: 0,
        }
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
        };
        // Committed entries first: an entry of ours that committed is acknowledged even if this
        // replica lost leadership in the same step (it is on a majority). Ours means same index
        // and same term (Raft's log matching): a later leader may have put another entry at
        // our index.
        for e in work.committed.iter().chain(committed.iter()) {
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
        for e in self
            .replica
            .log()
            .entries()
            .iter()
            .filter(|e| e.index <= commit && !e.data.is_empty())
        {
            let Ok(Peek::Batch(h)) = peek_batch(&e.data, 0, MAX_ENTRY_BYTES) else {
                panic!(
                    "partition {}: entry {} is not a record batch",
                    self.partition, e.index
                )
            };
            for_each_record(&e.data, &h, 0, |_, _, k, v| {
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
