//! The shell side of every Raft group a node runs (the `__consumer_offsets` partitions, the
//! metadata log, the replicated topic partitions): turning what `storage::raft_log` found on
//! disk into what `replication::Replica` restarts from, making a replica's `Work` durable in that
//! log, the clock a leader's lease is measured on, and how often a replica compacts its log.
//!
//! Shared by `runtime::replicated`, `runtime::metadata_log` and `data::replica`, so it sits below
//! both layers. Must not: decide anything Raft decides, or hold state of its own.

use replication::eraftpb::{Entry, EntryType, HardState};
use replication::{Durable, SnapshotConf};
use std::time::Instant;
use storage::io::GlommioDir;
use storage::raft_log::{self, EntryRef, RaftLog};

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
/// held (`RaftLog::open`). `InvalidData` for a snapshot configuration that does not decode.
pub fn durable(
    hs: raft_log::HardState,
    snapshot: Option<raft_log::StoredSnapshot>,
    stored: Vec<raft_log::StoredEntry>,
) -> std::io::Result<Durable> {
    let snap_index = snapshot.as_ref().map_or(0, |s| s.index);
    let conf = match &snapshot {
        Some(s) if !s.conf.is_empty() => Some(SnapshotConf::decode(&s.conf).map_err(|why| {
            std::io::Error::new(
                std::io::ErrorKind::InvalidData,
                format!(
                    "raft snapshot at index {}: its configuration: {why}",
                    s.index
                ),
            )
        })?),
        // None stored (written before membership changes, or by a shell that has none): the
        // voters the replica is restarted with.
        _ => None,
    };
    Ok(Durable {
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
            conf,
        }),
        entries: stored
            .into_iter()
            .map(|e| Entry {
                // A configuration change is stored with its voters, and its data is raft-rs's
                // ConfChangeV2 as `persist` wrote it.
                entry_type: match e.voters {
                    Some(_) => EntryType::EntryConfChangeV2,
                    None => EntryType::EntryNormal,
                },
                term: e.term,
                index: e.index,
                data: e.data.into(),
                ..Default::default()
            })
            .collect(),
    })
}

/// How a snapshot's configuration is stored beside it (empty: none).
fn conf_bytes(conf: Option<&SnapshotConf>) -> Vec<u8> {
    conf.map(SnapshotConf::encode).unwrap_or_default()
}

/// Compact `log` to a snapshot the replica's state machine took (see `RaftLog::compact`), with
/// the configuration in force at its index.
pub async fn compact(
    log: &mut RaftLog<GlommioDir>,
    snap: &replication::LogSnapshot,
) -> std::io::Result<()> {
    log.compact(
        snap.index,
        snap.term,
        &snap.data,
        &conf_bytes(snap.conf.as_ref()),
    )
    .await
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
        log.install(s.index, s.term, &s.data, &conf_bytes(s.conf.as_ref()))
            .await?;
    }
    if !work.entries.is_empty() {
        // A configuration change is written with the voters it leads to, as Kafka node ids.
        let mut voters: Vec<(u64, Vec<i32>)> = Vec::with_capacity(work.change_voters.len());
        for (index, ids) in &work.change_voters {
            let ids: Result<Vec<i32>, _> = ids.iter().map(|&id| i32::try_from(id)).collect();
            let ids = ids.map_err(|_| {
                std::io::Error::new(
                    std::io::ErrorKind::InvalidInput,
                    format!("entry {index}: a voter id past a Kafka node id (i32)"),
                )
            })?;
            voters.push((*index, ids));
        }
        let mut entries = Vec::with_capacity(work.entries.len());
        for e in &work.entries {
            let voters = match e.entry_type {
                EntryType::EntryNormal => None,
                EntryType::EntryConfChangeV2 => {
                    let found = voters.iter().find(|(i, _)| *i == e.index);
                    Some(found.map(|(_, v)| &v[..]).ok_or_else(|| {
                        std::io::Error::other(format!(
                            "entry {}: a configuration change without its voters",
                            e.index
                        ))
                    })?)
                }
                // This crate proposes every change as a ConfChangeV2 (`Replica`), and raft-rs
                // leaves a joint configuration with one; the first kind would not read back.
                EntryType::EntryConfChange => {
                    return Err(std::io::Error::new(
                        std::io::ErrorKind::InvalidInput,
                        format!(
                            "entry {}: a configuration change of raft-rs's first kind",
                            e.index
                        ),
                    ))
                }
            };
            entries.push(EntryRef {
                index: e.index,
                term: e.term,
                data: &e.data,
                voters,
            });
        }
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

#[cfg(test)]
mod tests {
    use super::*;
    use replication::{Membership, Replica};
    use storage::batch::{decode_records, is_voters, parse_voters_change};
    use storage::log::LogConfig;

    /// Drive `r` to quiescence: persist each work into `log` and apply nothing else (no peers).
    async fn drive(r: &mut Replica, log: &mut RaftLog<GlommioDir>) {
        while let Some(work) = r.work() {
            persist(log, &work, 1).await.expect("persisted");
            r.persisted(&work);
        }
    }

    async fn open(dir: &std::path::Path) -> (Replica, RaftLog<GlommioDir>) {
        let (log, hs, snapshot, stored) =
            RaftLog::open(GlommioDir::new(dir).unwrap(), LogConfig::default())
                .await
                .expect("opened");
        let durable = durable(hs, snapshot, stored).expect("decoded");
        (Replica::restart(1, &[1], durable).expect("restarted"), log)
    }

    /// The voters records in the segment log, in order.
    fn voters_records(dir: &std::path::Path) -> Vec<Vec<i32>> {
        let mut names: Vec<_> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| p.extension().is_some_and(|x| x == "log"))
            .collect();
        names.sort();
        let mut out = Vec::new();
        for name in names {
            let bytes = std::fs::read(name).unwrap();
            let mut at = 0;
            while at < bytes.len() {
                let storage::batch::Peek::Batch(h) =
                    storage::batch::peek_batch(&bytes[at..], at as u64, 1 << 20).unwrap()
                else {
                    panic!("a torn batch")
                };
                let batch = &bytes[at..at + h.size];
                for r in decode_records(batch, &h, at as u64).unwrap() {
                    if is_voters(r.key.as_deref()) {
                        out.push(parse_voters_change(r.value.as_deref().unwrap()).unwrap().0);
                    }
                }
                at += h.size;
            }
        }
        out
    }

    /// A membership change reaches the disk as the broker writes it (a KRaft voters record in
    /// the segment log, the configuration beside a snapshot), and a restart comes back under
    /// it: from the entries, and from the snapshot once they are compacted away.
    #[test]
    fn a_membership_change_survives_a_restart_from_the_entries_and_from_the_snapshot() {
        let dir = std::env::temp_dir().join(format!("rl-raft-io-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let d = dir.clone();
        glommio::LocalExecutorBuilder::new(glommio::Placement::Unbound)
            .spawn(move || async move {
                let (mut r, mut log) = open(&d).await;
                r.campaign().unwrap();
                drive(&mut r, &mut log).await;
                assert!(r.role().is_leader);
                let mut batch = Vec::new();
                storage::batch::encode_batch(0, 1, &[(Some(b"k"), Some(b"v"))], &mut batch);
                r.propose(batch.clone()).unwrap();
                drive(&mut r, &mut log).await;
                // Node 2 joins: as a learner first, then as a voter on a later tick (each
                // change commits under the configuration before it: node 1 alone).
                r.change_voters(&[1, 2]).unwrap();
                for now in 1..=3 {
                    r.tick(now * 1000);
                    drive(&mut r, &mut log).await;
                    // Node 2 (not running here) answers that it holds the log: a learner is
                    // made a voter only once it answered.
                    if r.membership().learners == [2] {
                        let mut ack = replication::eraftpb::Message::default();
                        ack.set_msg_type(replication::eraftpb::MessageType::MsgAppendResponse);
                        (ack.from, ack.to, ack.term, ack.index) = (2, 1, r.term(), r.last_index());
                        r.step(ack).unwrap();
                        drive(&mut r, &mut log).await;
                    }
                }
                let two = Membership {
                    voters: vec![1, 2],
                    outgoing: vec![],
                    learners: vec![],
                };
                assert_eq!(r.membership(), two);
                assert_eq!(voters_records(&d), [vec![1], vec![1, 2]]);
                // Node 1 alone commits nothing more now; the entry stays in the log.
                r.propose(batch.clone()).unwrap();
                drive(&mut r, &mut log).await;
                let last = r.last_index();
                assert!(r.commit_index() < last);
                drop((r, log));

                // From the entries: the committed changes take effect again at restart.
                let (mut r, mut log) = open(&d).await;
                assert_eq!(r.membership(), two);
                assert_eq!(r.last_index(), last);
                // Apply what is committed again.
                drive(&mut r, &mut log).await;
                // Compacted past both changes: the snapshot carries the configuration (without
                // it the restart would come back with the voters it is given, [1]).
                let applied = r.applied_index();
                let snap = replication::LogSnapshot {
                    index: applied,
                    term: r.term_at(applied),
                    data: b"state".to_vec(),
                    conf: Some(r.conf_at(applied)),
                };
                compact(&mut log, &snap).await.unwrap();
                r.compact(applied, snap.data.clone());
                drive(&mut r, &mut log).await;
                drop((r, log));
                let (mut r, mut log) = open(&d).await;
                assert_eq!((r.snapshot_index(), r.last_index()), (applied, last));
                assert_eq!(r.membership(), two);
                // So it cannot lead alone any more: node 2 votes too.
                r.campaign().unwrap();
                drive(&mut r, &mut log).await;
                assert!(!r.role().is_leader);
            })
            .unwrap()
            .join()
            .unwrap();
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
