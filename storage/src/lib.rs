//! `storage`: Ringleader's durable files.
//!
//! Owns: Kafka record batches v2 (`batch`, CRC-32C, byte-exact), append-only partition logs of
//! segment files (synced per batch, or left unsynced behind the journal) and recovery that
//! truncates a torn or corrupt tail (`log`), the per-shard write-ahead journal whose one
//! fdatasync per round makes the batches of many partition logs durable, with its checkpoints and
//! its recovery into the logs (`journal`), key compaction of those logs in slices with tombstone retention
//! (`compact`), a replicated partition's Raft log and hard state kept in its segment log (`raft_log`),
//! snapshots (`snapshot`), topic-partition logs (`topic_log`), the file backend trait
//! with an io_uring implementation and a fault-injecting in-memory one (`io`), and small durable
//! files written whole (`durable_file`).
//!
//! Must not: know what a group, a member or an offset commit is. It stores keys and values; the
//! engine gives them meaning.

pub mod batch;
pub mod compact;
pub mod durable_file;
pub mod io;
pub mod journal;
pub mod log;
pub mod raft_log;
pub mod snapshot;
pub mod topic_log;
