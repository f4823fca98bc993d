//! What every simulated member looks like to the runtime, whichever group protocol it speaks.
//!
//! A member is a pure state machine: it is fed events (start, a timer, a response, a lost
//! request, churn, shutdown) together with the current time, and answers with [`Action`]s —
//! requests to send, timers to set, and facts to count. It never reads a clock, touches a socket
//! or picks a connection; the worker (`worker.rs`) does all of that. The classic protocol is
//! `classic::ClassicMember`; a KIP-848 `ConsumerGroupHeartbeat` member implements the same trait.

use crate::api::{Api, Versions};
use crate::assign::{Assigned, TopicInfo};
use bytes::Bytes;
use kafka_protocol::messages::GroupId;
use wire::{Request, Response};

/// Time in microseconds since the run started (the runtime's clock, passed in).
pub type Micros = u64;

/// Settings shared by every member of a run.
#[derive(Debug, Clone)]
pub struct MemberCfg {
    pub session_timeout_ms: i32,
    pub rebalance_timeout_ms: i32,
    pub heartbeat_interval_us: Micros,
    /// KIP-848 members: use this interval instead of the one the broker returns (the
    /// `--heartbeat-interval-ms` flag, when given).
    pub heartbeat_interval_override_us: Option<Micros>,
    /// 0 = never commit.
    pub commit_interval_us: Micros,
    /// Closed loop (default): each member heartbeats on its interval. Open loop (`--rate`): the
    /// runtime asks stable members for heartbeats at a fixed total rate instead.
    pub closed_loop_heartbeats: bool,
    /// Wait before retrying after a coordinator error or a lost connection.
    pub retry_backoff_us: Micros,
    /// How far each commit moves a partition's fake offset.
    pub commit_offset_step: i64,
    /// KIP-848 members: stable only once they own at least this many partitions
    /// (`--expect-partitions`), for runs where every member's final share is known.
    pub expect_partitions: Option<usize>,
}

impl Default for MemberCfg {
    fn default() -> Self {
        MemberCfg {
            session_timeout_ms: 45_000,
            rebalance_timeout_ms: 300_000,
            heartbeat_interval_us: 3_000_000,
            heartbeat_interval_override_us: None,
            commit_interval_us: 5_000_000,
            closed_loop_heartbeats: true,
            retry_backoff_us: 100_000,
            commit_offset_step: 10,
            expect_partitions: None,
        }
    }
}

/// What a member needs to know about its surroundings to build requests.
#[derive(Debug, Clone, Copy)]
pub struct Ctx<'a> {
    pub cfg: &'a MemberCfg,
    pub versions: &'a Versions,
    pub group_id: &'a GroupId,
    pub topics: &'a [TopicInfo],
    /// The encoded ConsumerProtocolSubscription the member offers in JoinGroup.
    pub subscription: &'a Bytes,
}

/// Timers a member asks for. The runtime tags each with the member's epoch and drops it if the
/// epoch has moved on by the time it fires.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum TimerKind {
    Heartbeat,
    Commit,
    /// Retry a join after a backoff.
    Retry,
}

/// What a member wants done.
#[derive(Debug, Clone, PartialEq)]
pub enum Action {
    /// Send this request. Requests that the broker may hold for a long time (JoinGroup,
    /// SyncGroup) go on a connection of their own; the runtime decides by api key.
    Send(Request),
    /// Call `on_timer(kind)` at this time (if the epoch is unchanged).
    Timer { kind: TimerKind, at_us: Micros },
    /// The member reached a stable generation with an assignment; `convergence_us` runs from the
    /// start of its join (or rejoin) to now.
    Stable { convergence_us: Micros },
    /// A response or condition that is a real error (as opposed to the protocol's normal signals
    /// such as MEMBER_ID_REQUIRED or REBALANCE_IN_PROGRESS).
    Error { api: Api, code: i16 },
}

/// A simulated group member.
pub trait MemberMachine {
    /// Begin: join the group as a new member.
    fn start(&mut self, cx: &Ctx, now: Micros, out: &mut Vec<Action>);
    /// A timer the member set has fired (epoch already checked by the runtime).
    fn on_timer(&mut self, cx: &Ctx, kind: TimerKind, now: Micros, out: &mut Vec<Action>);
    /// A response to one of this member's requests sent in the current epoch.
    fn on_response(&mut self, cx: &Ctx, resp: Response, now: Micros, out: &mut Vec<Action>);
    /// A request of the current epoch will never be answered (connection lost or timed out).
    fn on_lost(&mut self, cx: &Ctx, api: Api, now: Micros, out: &mut Vec<Action>);
    /// Churn: leave the group and come back as a new member. Returns false (and does nothing)
    /// unless the member is stable.
    fn churn(&mut self, cx: &Ctx, now: Micros, out: &mut Vec<Action>) -> bool;
    /// The run is over: leave the group (if `leave`) and stop.
    fn shutdown(&mut self, cx: &Ctx, leave: bool, now: Micros, out: &mut Vec<Action>);
    /// Open-loop mode: send one heartbeat now if stable. Returns whether one was sent.
    fn open_loop_heartbeat(&mut self, cx: &Ctx, now: Micros, out: &mut Vec<Action>) -> bool;
    /// Bumped whenever earlier requests and timers become irrelevant (rejoin, leave).
    fn epoch(&self) -> u32;
    fn is_stable(&self) -> bool;
    /// Stopped after `shutdown` (nothing left in flight that matters).
    fn is_done(&self) -> bool;
    /// The partitions the member owns right now (for the end-of-run ownership check).
    fn owned_partitions(&self) -> &[Assigned] {
        &[]
    }
}

/// A tiny deterministic generator (splitmix64) so members can jitter timers without a clock or
/// global state.
#[derive(Debug, Clone)]
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Self {
        Rng(seed ^ 0x9E37_79B9_7F4A_7C15)
    }
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    /// Uniform in `[1, n]` (n ≥ 1); 0 when n is 0.
    pub fn upto(&mut self, n: u64) -> u64 {
        if n == 0 {
            0
        } else {
            1 + self.next_u64() % n
        }
    }
}
