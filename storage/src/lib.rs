//! `storage`: Ringleader's durable files.
//!
//! Owns: writing files so that a crash leaves either the old or the new content and never a mix
//! (`durable_file`), and — as the storage issue lands — the append-only `__consumer_offsets`
//! segment logs (record batches v2, CRC-32C, io_uring writes, group commit with fdatasync),
//! recovery that truncates a torn tail, rkyv snapshots and compaction.
//!
//! Must not: know what a group, a member or an offset commit is. It stores bytes and keys; the
//! engine gives them meaning.

pub mod durable_file;
