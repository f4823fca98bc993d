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
use std::cell::{Cell, RefCell};
use std::future::Future;
use std::pin::Pin;
use std::rc::Rc;
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
}

/// Where a partition's records go once the state machine has produced them.
///
/// Until the durable log lands (storage issue), records are kept in memory, bounded: past
/// `IN_MEMORY_SINK_MAX_RECORDS` the oldest are dropped and only counted. The log replaces this
/// with segment files, and responses will then wait for fdatasync.
pub trait RecordSink {
    fn append(&mut self, records: Vec<Record>);
}

pub const IN_MEMORY_SINK_MAX_RECORDS: usize = 1 << 20;

#[derive(Debug, Default)]
pub struct InMemorySink {
    pub records: std::collections::VecDeque<Record>,
    pub appended: u64,
    pub dropped: u64,
}

impl RecordSink for InMemorySink {
    fn append(&mut self, records: Vec<Record>) {
        for r in records {
            self.appended += 1;
            if self.records.len() == IN_MEMORY_SINK_MAX_RECORDS {
                self.records.pop_front();
                self.dropped += 1;
            }
            self.records.push_back(r);
        }
    }
}

struct Slot {
    coordinator: Coordinator,
    sink: InMemorySink,
    ops_served: u64,
}

/// The partitions one shard owns: `p` such that `p % shards == shard`.
pub struct PartitionTable {
    shard: usize,
    shards: usize,
    slots: Vec<RefCell<Slot>>,
    waiters: RefCell<hashbrown::HashMap<ReqId, Rc<OneShot<GroupResponse>>>>,
    next_req: Cell<ReqId>,
    clock: fn() -> i64,
}

/// Milliseconds since the Unix epoch: Kafka's commit timestamps and deadlines use wall time.
pub fn wall_clock_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
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
                    coordinator,
                    sink: InMemorySink::default(),
                    ops_served: 0,
                })
            })
            .collect();
        Self {
            shard,
            shards,
            slots,
            waiters: RefCell::default(),
            next_req: Cell::new(1),
            clock,
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
                let id = self.next_req.get();
                self.next_req.set(id + 1);
                let waiter = OneShot::new();
                self.waiters.borrow_mut().insert(id, waiter.clone());
                let now = (self.clock)();
                let mut out = Output::default();
                {
                    let mut slot = self.slots[idx].borrow_mut();
                    slot.ops_served += 1;
                    slot.coordinator.handle(id, &ctx, req, now, &mut out);
                    // Deadlines already due (a zero initial delay, say) fire now, not a tick later.
                    if slot.coordinator.next_deadline().is_some_and(|d| d <= now) {
                        slot.coordinator.tick(now, &mut out);
                    }
                }
                self.deliver(idx, out);
                Box::pin(async move { PartitionReply::Group(waiter.wait().await) })
            }
        }
    }

    /// Records first, then responses: nothing is acknowledged before its record is handed on.
    fn deliver(&self, idx: usize, out: Output) {
        if !out.records.is_empty() {
            self.slots[idx].borrow_mut().sink.append(out.records);
        }
        if out.replies.is_empty() {
            return;
        }
        let mut waiters = self.waiters.borrow_mut();
        for (id, resp) in out.replies {
            if let Some(w) = waiters.remove(&id) {
                w.complete(resp);
            }
        }
    }

    /// Fire every due deadline of every partition.
    pub fn tick(&self, now: i64) {
        for idx in 0..self.slots.len() {
            let mut out = Output::default();
            {
                let mut slot = self.slots[idx].borrow_mut();
                if !slot.coordinator.next_deadline().is_some_and(|d| d <= now) {
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

    /// Records handed to the sink so far, per owned partition (tests, diagnostics).
    pub fn records_appended(&self) -> u64 {
        self.slots.iter().map(|s| s.borrow().sink.appended).sum()
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
}
