//! The shell side of every Raft group a node runs (the `__consumer_offsets` partitions, the
//! metadata log, the replicated topic partitions): turning what `storage::raft_log` found on
//! disk into what `replication::Replica` restarts from, making a replica's `Work` durable in that
//! log, the clock a leader's lease is measured on, and how often a replica compacts its log.
//!
//! Shared by `runtime::replicated`, `runtime::metadata_log` and `data::replica`, so it sits below
//! both layers. Must not: decide anything Raft decides, or hold state of its own.

use replication::eraftpb::{Entry, EntryType, HardState};
use replication::Durable;
use std::time::Instant;
use storage::io::GlommioDir;
use storage::raft_log::{self, RaftLog};

/// The lease's clock: monotonic milliseconds (a wall clock stepped back by NTP would stretch a
/// lease past the followers' promise).
pub fn mono_ms() -> i64 {
    static START: std::sync::OnceLock<Instant> = std::sync::OnceLock::new();
    START.get_or_init(Instant::now).elapsed().as_millis() as i64
}

/// Bytes of entries a replicated partition applies between two snapshots, at least:
/// `replication::partition::SNAPSHOT_MIN_BYTES`, or for tests that need compaction to happen
/// within seconds, `RINGLEADER_TEST_RAFT_SNAPSHOT_BYTES`.
pub fn snapshot_min_bytes() -> usize {
    static BYTES: std::sync::OnceLock<usize> = std::sync::OnceLock::new();
    *BYTES.get_or_init(|| {
        std::env::var("RINGLEADER_TEST_RAFT_SNAPSHOT_BYTES")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(replication::partition::SNAPSHOT_MIN_BYTES)
    })
}

/// What a restarted replica starts from: the hard state, snapshot and entries its Raft log
/// held (`RaftLog::open`).
pub fn durable(
    hs: raft_log::HardState,
    snapshot: Option<raft_log::StoredSnapshot>,
    stored: Vec<raft_log::StoredEntry>,
) -> Durable {
    let snap_index = snapshot.as_ref().map_or(0, |s| s.index);
    Durable {
        hard_state: HardState {
            term: hs.term,
            vote: hs.vote,
            // Never past the log: a commit index beyond what survived is not ours to claim
            // (the leader tells it again). `Replica::restart` raises it to the snapshot's.
            commit: hs.commit.min(stored.last().map_or(snap_index, |e| e.index)),
            ..Default::default()
        },
        snapshot: snapshot.map(|s| replication::LogSnapshot {
            index: s.index,
            term: s.term,
            data: s.data,
            // The broker never changes a partition's membership yet: its voters are
            // `controller.quorum.voters`, which the replica is restarted with.
            conf: None,
        }),
        entries: stored
            .into_iter()
            .map(|e| Entry {
                entry_type: EntryType::EntryNormal,
                term: e.term,
                index: e.index,
                data: e.data.into(),
                ..Default::default()
            })
            .collect(),
    }
}

/// Make one `Work`'s entries and hard state durable in `log` (one sync; nothing when it has
/// neither). `leader` is stamped in the batches as the partition leader epoch's writer.
pub async fn persist(
    log: &mut RaftLog<GlommioDir>,
    work: &replication::Work,
    leader: i32,
) -> std::io::Result<()> {
    if work.entries.is_empty() && work.hard_state.is_none() && work.snapshot.is_none() {
        return Ok(());
    }
    if let Some(s) = &work.snapshot {
        // A leader's snapshot replaces the whole log, before the entries that follow it.
        log.install(s.index, s.term, &s.data).await?;
    }
    if !work.entries.is_empty() {
        let entries: Vec<(u64, u64, &[u8])> = work
            .entries
            .iter()
            .map(|e| {
                assert_eq!(
                    e.entry_type,
                    EntryType::EntryNormal,
                    "membership changes are not supported yet"
                );
                (e.index, e.term, &e.data[..])
            })
            .collect();
        log.append(&entries, leader, crate::clock::wall_clock_ms())
            .await?;
    }
    if let Some(hs) = &work.hard_state {
        log.set_hard_state(raft_log::HardState {
            term: hs.term,
            vote: hs.vote,
            commit: hs.commit,
        })
        .await?;
    }
    if work.must_sync {
        log.keep_commit_durable();
    }
    log.sync().await
}
