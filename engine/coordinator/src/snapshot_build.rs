//! Building a `__consumer_offsets` snapshot in slices, so a partition with a large state never
//! stalls its shard: each slice turns a bounded number of groups into snapshot records.
//!
//! The snapshot is *fuzzy*: its covered offset S is the durable end when the build starts, and
//! each group is captured at the moment its slice runs, later than S. That is still a correct
//! starting point for a load, because a load replays every record after S on top of it and
//! replay is per key (the last record of a key decides): a key captured with a value written
//! after S gets the same value again from the log; a key deleted after S is deleted again by its
//! tombstone (compaction keeps every tombstone above the snapshot a partition loads from); a key
//! created after S is in the log. Replay also accepts a group's records in any order (a member's
//! assignment before the group's metadata), which the per-group capture relies on.
//!
//! Pending transactional offsets are the exception: they are captured whole by the first slice,
//! at S exactly (the build starts when every record is durable), and placed after every other
//! record. A marker after S must find in the snapshot only what was pending at S (a pending
//! offset captured later could belong to the producer's next transaction, which the replayed
//! marker would wrongly commit), and they must replay after the committed offsets so that
//! those do not mark them stale again (each carries its own stale flag, see `group::txn`).
//!
//! The caller runs a slice only when nothing is pending (every record the coordinator produced
//! is durable), so a snapshot never holds the effect of a write that could still fail.

use crate::group::{consumer, Coordinator};
use std::ops::Bound;
use wire::records::{Record, RecordKey, RecordValue};

/// One record of a snapshot: a `__consumer_offsets` key and value, encoded. The broker writes
/// these into its snapshot file (`storage::snapshot`); the simulator keeps them in memory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SnapshotRecord {
    pub key: Vec<u8>,
    pub value: Vec<u8>,
}

enum Phase {
    /// Classic groups after this id.
    Classic(Option<String>),
    /// Consumer groups after this id.
    Consumer(Option<String>),
    /// Offsets of these groups, from this index (the names are taken when the phase starts).
    Offsets(Vec<String>, usize),
    Done,
}

pub struct SnapshotBuild {
    /// The offset the snapshot covers: the log's last durable offset when the build started.
    pub covered: u64,
    phase: Phase,
    records: Vec<SnapshotRecord>,
    /// The pending transactional offsets at `covered`, written after `records`.
    txn: Vec<SnapshotRecord>,
    pub slices: u32,
}

impl SnapshotBuild {
    pub fn new(covered: u64) -> Self {
        Self {
            covered,
            phase: Phase::Classic(None),
            records: Vec::new(),
            txn: Vec::new(),
            slices: 0,
        }
    }

    /// Capture at least one group and stop once about `budget` records were added (a group is
    /// never split). Call it only when every record `c` produced is durable. True when done.
    pub fn step(&mut self, c: &Coordinator, budget: usize) -> anyhow::Result<bool> {
        if self.slices == 0 {
            self.txn = c
                .snapshot_txn_records()?
                .into_iter()
                .map(|(key, value)| SnapshotRecord { key, value })
                .collect();
        }
        self.slices += 1;
        let start = self.records.len();
        let full = |r: &Vec<SnapshotRecord>| r.len() - start >= budget.max(1);
        loop {
            match std::mem::replace(&mut self.phase, Phase::Done) {
                Phase::Done => return Ok(true),
                Phase::Classic(after) => {
                    let mut out = Vec::new();
                    let next =
                        capture_groups(&c.groups, after, &mut self.records, full, |id, g| {
                            out.clear();
                            if let Some(v) = &g.last_record {
                                out.push(Record {
                                    key: RecordKey::GroupMetadata { group: id.clone() },
                                    value: Some(RecordValue::GroupMetadata(v.clone())),
                                });
                            }
                            std::mem::take(&mut out)
                        })?;
                    self.phase = match next {
                        None => Phase::Consumer(None),
                        Some(resume_after) => Phase::Classic(resume_after),
                    };
                }
                Phase::Consumer(after) => {
                    let next = capture_groups(
                        &c.consumer_groups,
                        after,
                        &mut self.records,
                        full,
                        |_, g| {
                            let mut out = Vec::new();
                            consumer::snapshot_records(g, &mut out);
                            out
                        },
                    )?;
                    self.phase = match next {
                        None => Phase::Offsets(c.offsets.group_ids(), 0),
                        Some(resume_after) => Phase::Consumer(resume_after),
                    };
                }
                Phase::Offsets(names, mut i) => {
                    while i < names.len() && !full(&self.records) {
                        let group = &names[i];
                        for (topic, partition) in c.offsets.keys_of(group) {
                            if let Some(v) = c.offsets.get(group, &topic, partition) {
                                push(
                                    &mut self.records,
                                    Record {
                                        key: RecordKey::OffsetCommit {
                                            group: group.clone(),
                                            topic,
                                            partition,
                                        },
                                        value: Some(RecordValue::OffsetCommit(v.to_value())),
                                    },
                                )?;
                            }
                        }
                        i += 1;
                    }
                    self.phase = if i < names.len() {
                        Phase::Offsets(names, i)
                    } else {
                        Phase::Done
                    };
                }
            }
            if matches!(self.phase, Phase::Done) {
                return Ok(true);
            }
            if full(&self.records) {
                return Ok(false);
            }
        }
    }

    pub fn into_records(mut self) -> Vec<SnapshotRecord> {
        self.records.append(&mut self.txn);
        self.records
    }
}

/// Capture the groups of `map` after the id `after`, in id order, until `full` says the slice
/// is done: `records_of` gives each group's records. `None` when the map is exhausted, else
/// where to resume (after the last id captured).
fn capture_groups<G>(
    map: &std::collections::BTreeMap<String, G>,
    after: Option<String>,
    records: &mut Vec<SnapshotRecord>,
    full: impl Fn(&Vec<SnapshotRecord>) -> bool,
    mut records_of: impl FnMut(&String, &G) -> Vec<Record>,
) -> anyhow::Result<Option<Option<String>>> {
    let range = match &after {
        Some(a) => map.range::<String, _>((Bound::Excluded(a), Bound::Unbounded)),
        None => map.range::<String, _>(..),
    };
    let mut last = after.clone();
    for (id, g) in range {
        if full(records) {
            return Ok(Some(last));
        }
        for r in records_of(id, g) {
            push(records, r)?;
        }
        last = Some(id.clone());
    }
    Ok(None)
}

fn push(out: &mut Vec<SnapshotRecord>, r: Record) -> anyhow::Result<()> {
    let key = r.encode_key().map_err(|e| anyhow::anyhow!("{e}"))?;
    let value = r
        .encode_value()
        .map_err(|e| anyhow::anyhow!("{e}"))?
        .unwrap_or_default();
    out.push(SnapshotRecord { key, value });
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::group::GroupConfig;
    use wire::records::OffsetCommitValue;

    fn commit(group: &str, partition: i32, offset: i64) -> Record {
        Record {
            key: RecordKey::OffsetCommit {
                group: group.into(),
                topic: "t".into(),
                partition,
            },
            value: Some(RecordValue::OffsetCommit(OffsetCommitValue {
                offset,
                leader_epoch: -1,
                metadata: String::new(),
                commit_timestamp: 1_000,
                expire_timestamp: -1,
                topic_id: Default::default(),
            })),
        }
    }

    fn replay_all(records: &[SnapshotRecord]) -> Coordinator {
        let mut c = Coordinator::new(0, GroupConfig::default());
        for r in records {
            assert!(c.replay_bytes(&r.key, Some(&r.value)));
        }
        c
    }

    #[test]
    fn sliced_build_of_a_still_state_equals_the_whole_snapshot() {
        let mut c = Coordinator::new(0, GroupConfig::default());
        for g in 0..30 {
            for p in 0..7 {
                c.replay(&commit(&format!("g{g}"), p, (g * 10 + p) as i64));
            }
        }
        let whole = replay_all(
            &c.snapshot_records()
                .into_iter()
                .map(|r| SnapshotRecord {
                    key: r.encode_key().unwrap(),
                    value: r.encode_value().unwrap().unwrap_or_default(),
                })
                .collect::<Vec<_>>(),
        );
        let mut b = SnapshotBuild::new(0);
        while !b.step(&c, 10).unwrap() {}
        assert!(b.slices > 10, "the build took several slices");
        let sliced = replay_all(&b.into_records());
        assert_eq!(sliced.durable_view(), whole.durable_view());
        assert_eq!(sliced.durable_view(), c.durable_view());
    }

    #[test]
    fn a_fuzzy_snapshot_plus_the_records_after_its_offset_gives_the_final_state() {
        // Records keep arriving between slices; a load replays everything after the covered
        // offset on top of the snapshot and must end where the coordinator ended.
        let mut c = Coordinator::new(0, GroupConfig::default());
        let mut log: Vec<Record> = Vec::new();
        let apply = |c: &mut Coordinator, r: Record, log: &mut Vec<Record>| {
            c.replay(&r);
            log.push(r);
        };
        for g in 0..20 {
            apply(&mut c, commit(&format!("g{g}"), 0, 1), &mut log);
        }
        let covered = log.len() as u64 - 1;
        let mut b = SnapshotBuild::new(covered);
        let mut n = 0i64;
        loop {
            let done = b.step(&c, 3).unwrap();
            // Between slices: groups already captured and groups not yet captured change; one
            // group's offset is deleted and another group's first offset appears.
            n += 1;
            apply(
                &mut c,
                commit(&format!("g{}", n % 20), 0, 100 + n),
                &mut log,
            );
            apply(&mut c, commit(&format!("new{n}"), 1, n), &mut log);
            if n == 2 {
                apply(
                    &mut c,
                    Record {
                        key: RecordKey::OffsetCommit {
                            group: "g19".into(),
                            topic: "t".into(),
                            partition: 0,
                        },
                        value: None,
                    },
                    &mut log,
                );
            }
            if done {
                break;
            }
        }
        let mut loaded = replay_all(&b.into_records());
        for r in &log[(covered as usize + 1)..] {
            loaded.replay(r);
        }
        assert_eq!(loaded.offsets.all(), c.offsets.all());
    }
}
