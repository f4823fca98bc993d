//! What the replication simulations share: the seeded generator, the voters, the clock's steps,
//! and the simulated durable write.
#![allow(dead_code)] // each test binary uses its own part of this

use replication::{Durable, NodeId, Work};

/// splitmix64: small, seedable, no dependency.
pub struct Rng(pub u64);

impl Rng {
    pub fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    pub fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }

    pub fn chance(&mut self, per_mille: u64) -> bool {
        self.below(1000) < per_mille
    }
}

pub const VOTERS: [NodeId; 3] = [1, 2, 3];

/// Simulation steps per Raft tick: messages take a few steps, so many round trips fit in one
/// tick as on a real network (100 ms ticks, sub-millisecond loopback).
pub const STEPS_PER_TICK: u64 = 10;

/// The shell's durable write of `work`, on a simulated disk that a crash keeps: the entries
/// replace the log from their first index on, the hard state replaces the old one.
pub fn persist(disk: &mut Durable, work: &Work) {
    if let Some(first) = work.entries.first() {
        disk.entries.truncate((first.index - 1) as usize);
        disk.entries.extend(work.entries.iter().cloned());
    }
    if let Some(hs) = &work.hard_state {
        disk.hard_state = hs.clone();
    }
}
