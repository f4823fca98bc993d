//! The operations a `__consumer_offsets` partition answers, and the per-shard table of the
//! partitions a shard owns.
//!
//! Each partition's state lives on exactly one shard and is only ever touched there, through
//! [`crate::router::Router::call`]. Today a partition answers `Status` (who owns it, how many
//! operations it has run); the coordinator state machine of the classic-groups work plugs in here.

use std::cell::RefCell;

/// An operation on one partition, sent to the shard that owns it.
#[derive(Debug)]
pub enum PartitionOp {
    /// Report which shard holds the partition and how many operations it has served.
    Status,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PartitionReply {
    Status {
        partition: i32,
        shard: usize,
        ops_served: u64,
    },
    /// The owning shard is gone (shutting down): callers map this to COORDINATOR_NOT_AVAILABLE.
    Unavailable,
}

/// One partition's state. Owned by one shard, never shared.
#[derive(Debug, Default)]
pub struct PartitionState {
    ops_served: u64,
}

/// The partitions one shard owns: `p` such that `p % shards == shard`.
#[derive(Debug)]
pub struct PartitionTable {
    shard: usize,
    shards: usize,
    states: RefCell<Vec<PartitionState>>,
}

impl PartitionTable {
    pub fn new(shard: usize, shards: usize, partitions: i32) -> Self {
        let owned = (0..partitions.max(0) as usize)
            .filter(|p| p % shards == shard)
            .count();
        let states = (0..owned).map(|_| PartitionState::default()).collect();
        Self {
            shard,
            shards,
            states: RefCell::new(states),
        }
    }

    /// Run `op` on `partition`, which must be owned by this shard.
    pub fn execute(&self, partition: i32, op: PartitionOp) -> PartitionReply {
        let idx = partition as usize / self.shards;
        let mut states = self.states.borrow_mut();
        let Some(state) = states
            .get_mut(idx)
            .filter(|_| partition as usize % self.shards == self.shard)
        else {
            return PartitionReply::Unavailable;
        };
        state.ops_served += 1;
        match op {
            PartitionOp::Status => PartitionReply::Status {
                partition,
                shard: self.shard,
                ops_served: state.ops_served,
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_shard_answers_only_for_its_partitions() {
        let t = PartitionTable::new(1, 2, 50);
        assert_eq!(
            t.execute(3, PartitionOp::Status),
            PartitionReply::Status {
                partition: 3,
                shard: 1,
                ops_served: 1
            }
        );
        assert_eq!(
            t.execute(3, PartitionOp::Status),
            PartitionReply::Status {
                partition: 3,
                shard: 1,
                ops_served: 2
            }
        );
        assert_eq!(
            t.execute(4, PartitionOp::Status),
            PartitionReply::Unavailable
        );
        assert_eq!(
            t.execute(49, PartitionOp::Status),
            PartitionReply::Status {
                partition: 49,
                shard: 1,
                ops_served: 1
            }
        );
        assert_eq!(
            t.execute(51, PartitionOp::Status),
            PartitionReply::Unavailable
        );
    }
}
