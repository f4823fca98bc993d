//! `storage`: Ringleader's durable files.
//!
//! Owns: Kafka record batches v2 (`batch`, CRC-32C, byte-exact), append-only partition logs of
//! segment files with one write + one fdatasync per batch and recovery that truncates a torn or
//! corrupt tail (`log`), key compaction of those logs in slices with tombstone retention
//! (`compact`), snapshots (`snapshot`), topic-partition logs (`topic_log`), the file backend trait
//! with an io_uring implementation and a fault-injecting in-memory one (`io`), and small durable
//! files written whole (`durable_file`).
//!
//! Must not: know what a group, a member or an offset commit is. It stores keys and values; the
//! engine gives them meaning.

pub mod batch;
pub mod compact;
pub mod durable_file;
pub mod io;
pub mod log;
pub mod snapshot;
pub mod topic_log;
