//! `loadgen`: simulated consumer-group members over real TCP, for load-testing Ringleader or any
//! Kafka-compatible broker.
//!
//! Owns: the command line (`config`), start-up against the bootstrap broker — version
//! negotiation, topic creation, coordinator lookup (`setup`) —, the member state machines
//! (`member` is the protocol-neutral trait; `classic` the JoinGroup/SyncGroup/Heartbeat consumer;
//! `consumer` the KIP-848 ConsumerGroupHeartbeat consumer), the leader's range assignor and the
//! embedded consumer
//! protocol (`assign`), the event-loop workers that multiplex members over TCP connections
//! (`worker`), latency histograms and counters (`stats`), group convergence as the client sees it
//! (`converge`), the broker's CPU and RSS from /proc (`procstat`), and the reports: percentile
//! table, `.hgrm` files, `summary.json`, `latency.svg` (`report`).
//!
//! Must not: share code paths with the `engine` crate. loadgen is the broker's adversary and
//! witness; reusing the engine's group logic would hide the engine's bugs behind the same bugs
//! here. It may use `wire` for framing and message codecs (the `kafka-protocol` structs), which
//! are shared with every client anyway. The state machines are pure — time comes in as an
//! argument, requests go out as values — so they are tested without a socket.

pub mod api;
pub mod assign;
pub mod classic;
pub mod config;
pub mod consumer;
pub mod converge;
pub mod member;
pub mod net;
pub mod procstat;
pub mod report;
pub mod run;
pub mod setup;
pub mod stats;
pub mod timerfd;
pub mod tls;
pub mod worker;

pub use config::Args;
pub use run::{
    run, Outcome, SetupError, CLASSIC_APIS, CONSUMER_APIS, EXIT_ERRORS, EXIT_OK, EXIT_SETUP,
};

// Unit tests decode responses too, so they run under the same guard as the binary.
#[cfg(test)]
#[global_allocator]
static TEST_ALLOC: wire::alloc::GuardedAlloc<std::alloc::System> =
    wire::alloc::GuardedAlloc(std::alloc::System);
