//! The thread-per-core runtime: everything that owns a thread, a socket, a file or a timer.
//!
//! - `server`: start one glommio executor per core, each accepting on the shared port, and stop
//!   them (the one shutdown token, `tasks::Shutdown`).
//! - `shard`: what one executor holds — its partitions, its topic data, its connections, its
//!   background tasks (`tasks::Tasks`) and its end of the mesh.
//! - `conn`: one client connection: frames in, responses out in request order. What a request
//!   means is the API layer's (`crate::api`), reached through `shard::Handler`.
//! - `router`: calls between shards, by typed route, with a bound on waiting for a stalled shard.
//! - `partition`: the glommio shell around each `__consumer_offsets` partition's sans-IO core
//!   (`coordinator::partition_core`): its log writer, snapshots, compaction and reloads.
//! - `replicated` and `peers`: on a node of a cluster (`controller.quorum.voters`), the shell
//!   around each `__consumer_offsets` partition's Raft replica (`replication`), and the
//!   node-to-node links its messages travel; `metadata_log`, on shard 0 of such a node, the
//!   cluster's metadata log (the topics every node shares, `replication::metadata`).
//! - `txn`: the glommio shell around each `__transaction_state` partition's transaction
//!   coordinator (`coordinator::txn`): its log writer and compaction, reloads, and the markers a
//!   transaction's end sends to data partitions and group coordinators.
//!
//! Must not: decide a protocol answer (that is `api/` and the coordinator crate), or let one
//! shard's state be touched from another thread.

pub mod conn;
pub mod journal;
pub mod metadata_log;
pub mod partition;
pub mod peers;
pub mod replicated;
pub mod router;
pub mod server;
pub mod shard;
pub mod tasks;
pub mod txn;
