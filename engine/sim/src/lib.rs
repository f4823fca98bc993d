//! `sim`: a seeded, deterministic simulator of the group coordinator under faults.
//!
//! Owns: the simulated world (clients, network, disks, crashes), the simulator's shell around the
//! broker's partition core, and the oracle's invariants. Must not: run in the broker (it is a
//! crate of its own, outside the broker library), or carry a copy of anything the broker does —
//! it drives `engine`'s own code; where it needs a decision the broker makes, that decision
//! belongs in `engine` (pure, `now` passed in) for both to call.
//!
//! Nothing here runs in the broker. The simulator drives the *real* state machines — one
//! [`engine::group::Coordinator`] per `__consumer_offsets` partition — and the *real* storage code
//! ([`storage::log::PartitionLog`] on the fault-injecting [`storage::io::MemDir`]) with fake time,
//! and checks invariants after every step. It exists to find the bugs that only show up when
//! crashes, torn writes, failed fsyncs and a misbehaving network meet thousands of members.
//!
//! What it models (see `world.rs` for the event loop):
//! - **Broker**: N partitions, each the broker's own sans-IO partition core
//!   ([`engine::partition_core::PartitionCore`]: the coordinator, group commit, parked replies,
//!   failure and reload, snapshot and compaction scheduling) over a `PartitionLog<MemDir>`. The
//!   simulator's shell (`broker.rs`) does only the I/O the core asks for, as `partition.rs` does
//!   in the broker: one writer batch at a time (one write + one fsync through
//!   `PartitionLog::append`), the reload after a failed append (retrying every second while the
//!   disk stays broken, after cutting the failed batch with
//!   [`storage::log::discard_unacknowledged`]), snapshot files (dropping the segments they
//!   cover) and compaction slices; a restart replays snapshot + log and calls `on_loaded`.
//!   Deadlines fire from a 5 ms ticker.
//! - **Disk**: `MemDir::fail_after(n)` (a failing disk, healed later), and power loss:
//!   `MemDir::crash` keeps a random torn prefix of unsynced bytes, including a batch whose append
//!   was cut after any of its I/O operations.
//! - **Network**: every request and response can be dropped, delayed (with a long tail),
//!   duplicated and therefore reordered; clients may be cut off for a while (zombies). A crash
//!   resets connections: requests sent to the old process are lost. As over TCP, a client hears
//!   at most one answer per request: the second copy of a duplicated request is processed by the
//!   coordinator (a stale retry arriving late, possibly after newer requests) but answered into
//!   the void; a client waits for one request of each kind at a time and ignores answers to
//!   requests it gave up on.
//! - **Clients**: classic members (JoinGroup with MEMBER_ID_REQUIRED, the leader's range
//!   assignment, SyncGroup, heartbeats, commits with their generation, LeaveGroup, static
//!   members, and Kafka's rejoin rules for every error), and KIP-848 members (heartbeats with
//!   epochs, revoke-then-acknowledge reconciliation with a commit of the revoked partitions,
//!   commits with the member epoch, subscription changes, leaving, fencing and rejoining). Any
//!   client can crash (stop sending) and come back as a new instance.
//! - **Transactions** (`txn.rs`): the broker's pure transaction coordinator on a
//!   `__transaction_state` partition of its own (its log on `MemDir`, torn writes and replay on
//!   crash), its markers written into the partition cores as `GroupRequest::TxnMarker`, and
//!   transactional clients (InitProducerId, AddOffsetsToTxn, TxnOffsetCommit with a member's
//!   generation or epoch, EndTxn commit or abort, OffsetFetch with and without
//!   `require_stable`). There is no topic data: read_committed is tested in `storage`.
//!
//! Invariants are listed in `oracle.rs`. A failure carries its seed and a one-line command that
//! replays it exactly: one seeded [`rng::Rng`] drives every decision, time is fake, and every
//! collection the simulator iterates is ordered (`BTreeMap`, sorted vectors).

mod broker;
mod clients;
mod journal;
mod oracle;
pub mod rng;
mod txn;
mod world;

use std::fmt;

/// The size of one simulated run. Everything else (fault rates, timeouts, network quality,
/// coordinator settings) is drawn from the seed, so every seed explores a different regime.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SimConfig {
    /// Simulated clients (members, over their lifetimes) across all groups.
    pub members: usize,
    /// Groups; each uses the classic or the consumer protocol, drawn from the seed.
    pub groups: usize,
    /// `__consumer_offsets` partitions (each with its own coordinator, log and disk).
    pub partitions: i32,
    /// Events to process with faults on, before the fault-free settle phase.
    pub steps: u64,
    /// Transactional producers committing offsets for the groups (`txn.rs`).
    pub txn_clients: usize,
    /// Up to this many ms between a TxnOffsetCommit's verification by the transaction
    /// coordinator and its write at the group's partition (0: at once, in the order the
    /// broker releases them). Above 0 an abort marker can overtake a verified write, which the
    /// partition's verification guard must refuse (docs/reliability.md). Below 0: per seed,
    /// odd seeds up to `-verify_hop_ms` ms, even seeds at once (the default, so both paths
    /// run in CI).
    pub verify_hop_ms: i64,
    /// Print every event (for replaying a failure).
    pub trace: bool,
}

impl Default for SimConfig {
    fn default() -> Self {
        Self {
            members: 60,
            groups: 8,
            partitions: 4,
            steps: 6000,
            txn_clients: 6,
            verify_hop_ms: -3,
            trace: false,
        }
    }
}

impl SimConfig {
    /// The command that replays `seed` with this configuration.
    pub fn replay_command(&self, seed: u64) -> String {
        format!(
            "cargo run --release -p ringleader-sim --example sim -- --seed {seed} \
             --members {} --groups {} --partitions {} --steps {} --txn-clients {} --verify-hop-ms {} --trace",
            self.members,
            self.groups,
            self.partitions,
            self.steps,
            self.txn_clients,
            self.verify_hop_ms
        )
    }
}

/// What one or more runs did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SimStats {
    pub seeds: u64,
    /// Events processed (fault phase and settle phase).
    pub steps: u64,
    /// Simulated milliseconds.
    pub sim_ms: u64,
    /// Requests that reached the coordinator (after drops).
    pub requests: u64,
    /// Responses the broker released (after durability).
    pub responses: u64,
    pub dropped: u64,
    pub duplicated: u64,
    pub broker_crashes: u64,
    pub disk_faults: u64,
    /// Appends that failed (requests failed with NOT_COORDINATOR, partition reloaded).
    pub failed_writes: u64,
    pub reloads: u64,
    pub snapshots: u64,
    /// Completed compaction passes.
    pub compactions: u64,
    pub batches: u64,
    pub records: u64,
    /// Journal rounds written and synced (each covers the batches of several partitions).
    pub journal_rounds: u64,
    /// Journal checkpoints completed (segments synced, older generations removed).
    pub checkpoints: u64,
    /// Batches journal recovery appended to a partition log after a crash.
    pub journal_batches_recovered: u64,
    pub client_crashes: u64,
    /// Clients stopped by an error a Kafka client treats as fatal (FENCED_INSTANCE_ID; a
    /// KIP-848 member's GROUP_ID_NOT_FOUND after its group went back to classic), each started
    /// again later as a new process.
    pub fatal_errors: u64,
    /// Acknowledged (released, error-free) offset commits, per partition committed.
    pub acked_commits: u64,
    /// Clients restarted with the other protocol (mixed groups: rolling upgrades/downgrades).
    pub protocol_switches: u64,
    /// Times a mixed group was seen held as the other kind than at its previous check, within
    /// one load (an online upgrade or downgrade, or an empty group converted).
    pub conversions: u64,
    /// Target assignments run off the request path, and those of them written when they came
    /// back (the others found their group gone, or the partition reloaded).
    pub assignments_offloaded: u64,
    pub assignments_written: u64,
    /// Requests that waited for room in their partition (over its bound on queued bytes).
    pub deferred: u64,
    /// Transactions whose markers were all written, by outcome.
    pub txn_committed: u64,
    pub txn_aborted: u64,
    /// Acknowledged TxnOffsetCommit requests.
    pub txn_offset_commits: u64,
    /// OffsetFetch answers checked against open transactions: UNSTABLE_OFFSET_COMMIT given
    /// (require_stable), and offsets a transactional client read and the oracle traced back.
    pub unstable_answers: u64,
    pub txn_reads_checked: u64,
    /// Individual invariant evaluations.
    pub checks: u64,
    /// A digest of every event processed, to prove that a seed replays identically.
    pub digest: u64,
}

impl SimStats {
    pub fn merge(&mut self, o: &SimStats) {
        self.seeds += o.seeds;
        self.steps += o.steps;
        self.sim_ms += o.sim_ms;
        self.requests += o.requests;
        self.responses += o.responses;
        self.dropped += o.dropped;
        self.duplicated += o.duplicated;
        self.broker_crashes += o.broker_crashes;
        self.disk_faults += o.disk_faults;
        self.failed_writes += o.failed_writes;
        self.reloads += o.reloads;
        self.snapshots += o.snapshots;
        self.compactions += o.compactions;
        self.batches += o.batches;
        self.records += o.records;
        self.journal_rounds += o.journal_rounds;
        self.checkpoints += o.checkpoints;
        self.journal_batches_recovered += o.journal_batches_recovered;
        self.client_crashes += o.client_crashes;
        self.fatal_errors += o.fatal_errors;
        self.acked_commits += o.acked_commits;
        self.protocol_switches += o.protocol_switches;
        self.conversions += o.conversions;
        self.assignments_offloaded += o.assignments_offloaded;
        self.assignments_written += o.assignments_written;
        self.deferred += o.deferred;
        self.txn_committed += o.txn_committed;
        self.txn_aborted += o.txn_aborted;
        self.txn_offset_commits += o.txn_offset_commits;
        self.unstable_answers += o.unstable_answers;
        self.txn_reads_checked += o.txn_reads_checked;
        self.checks += o.checks;
        self.digest = self.digest.rotate_left(5) ^ o.digest;
    }
}

impl fmt::Display for SimStats {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "seeds {} | steps {} | simulated {:.1} h | requests {} | responses {} | dropped {} | \
             duplicated {} | broker crashes {} | disk faults {} | failed writes {} | reloads {} | \
             snapshots {} | compactions {} | batches {} | records {} | journal rounds {} | \
             checkpoints {} | batches recovered from the journal {} | client crashes {} | \
             fatal client errors {} | acked commits {} | \
             protocol switches {} | conversions {} | offloaded assignments {} (written {}) | \
             requests deferred {} | transactions committed {} / aborted {} | \
             txn offset commits {} | unstable answers {} | txn reads checked {} | \
             invariant checks {}",
            self.seeds,
            self.steps,
            self.sim_ms as f64 / 3_600_000.0,
            self.requests,
            self.responses,
            self.dropped,
            self.duplicated,
            self.broker_crashes,
            self.disk_faults,
            self.failed_writes,
            self.reloads,
            self.snapshots,
            self.compactions,
            self.batches,
            self.records,
            self.journal_rounds,
            self.checkpoints,
            self.journal_batches_recovered,
            self.client_crashes,
            self.fatal_errors,
            self.acked_commits,
            self.protocol_switches,
            self.conversions,
            self.assignments_offloaded,
            self.assignments_written,
            self.deferred,
            self.txn_committed,
            self.txn_aborted,
            self.txn_offset_commits,
            self.unstable_answers,
            self.txn_reads_checked,
            self.checks
        )
    }
}

/// A broken invariant (or a panic inside the code under test), with what replays it.
#[derive(Debug, Clone)]
pub struct SimFailure {
    pub seed: u64,
    pub step: u64,
    pub sim_ms: i64,
    pub message: String,
    /// The last events before the failure, oldest first.
    pub recent: Vec<String>,
    pub replay: String,
}

impl fmt::Display for SimFailure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "seed {} failed at step {} (t={} ms): {}",
            self.seed, self.step, self.sim_ms, self.message
        )?;
        if !self.recent.is_empty() {
            writeln!(f, "last events:")?;
            for e in &self.recent {
                writeln!(f, "  {e}")?;
            }
        }
        write!(f, "replay: {}", self.replay)
    }
}

/// Run one seed to the end: the fault phase (`cfg.steps` events), then a fault-free settle phase
/// after which every group must have converged. A panic in the code under test is reported as a
/// failure of this seed, not a crash of the caller.
pub fn run_seed(seed: u64, cfg: &SimConfig) -> Result<SimStats, Box<SimFailure>> {
    let mut cfg = cfg.clone();
    if cfg.verify_hop_ms < 0 {
        cfg.verify_hop_ms = if seed % 2 == 1 { -cfg.verify_hop_ms } else { 0 };
    }
    let cfg = &cfg;
    let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        let mut w = world::World::new(seed, cfg.clone());
        w.run()
    }));
    match outcome {
        Ok(r) => r,
        Err(panic) => {
            let msg = panic
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| panic.downcast_ref::<&str>().map(|s| s.to_string()))
                .unwrap_or_else(|| "non-string panic".into());
            Err(Box::new(SimFailure {
                seed,
                step: 0,
                sim_ms: 0,
                message: format!("panic: {msg}"),
                recent: Vec::new(),
                replay: cfg.replay_command(seed),
            }))
        }
    }
}
