//! The simulator's shell around the shard journal (`storage::journal`), as
//! `engine/src/runtime/journal.rs` is the broker's: partitions hand their written (unsynced)
//! batches to a round; a round is one append + one sync of the journal file after a drawn
//! latency; a checkpoint syncs the segments written before a rotation and removes the older
//! generations. Crashes tear the journal's unsynced bytes and a round or checkpoint in flight;
//! the restart runs the broker's own recovery before any partition loads.
//!
//! It decides nothing the broker's shell does not: the order (segment write, then round, then
//! reply), the cut journaled before a reloaded partition serves again, and when files may go.

use super::world::{Ev, World};
use futures_lite::future::block_on;
use std::collections::BTreeMap;
use storage::io::{LogDir, MemDir};
use storage::journal::{Entry, Journal};

/// A batch handed to the journal: (partition slot, the batch's `upto`, base offset, bytes).
#[derive(Debug)]
pub(super) struct Pending {
    pub s: usize,
    pub upto: u64,
    pub base: u64,
    pub bytes: Vec<u8>,
}

/// The shard's journal as the simulator runs it (one shard holds every partition).
#[derive(Default)]
pub(super) struct SimJournal {
    pub dir: MemDir,
    /// `None` while the process is down.
    pub journal: Option<Journal<MemDir>>,
    /// Batches waiting for the next round.
    pub queue: Vec<Pending>,
    /// The round on its way to the disk.
    pub round: Option<Vec<Pending>>,
    pub scheduled: bool,
    /// Segments written since the last rotation, by partition (the last write's segment).
    pub dirty: BTreeMap<usize, String>,
    /// Checkpoint epoch (bumped at each rotation) and the segment writes in progress by the
    /// epoch they started in (`runtime::journal`'s `begin_segment_write`).
    pub epoch: u64,
    pub writing: BTreeMap<u64, usize>,
    /// A rotation whose checkpoint waits for earlier segment writes: (generation, epoch).
    pub checkpoint_waiting: Option<(u64, u64)>,
    /// A checkpoint under way: the generation it covers and the segments it syncs.
    pub checkpoint: Option<(u64, BTreeMap<usize, String>)>,
    pub failing: bool,
    /// Rotate once the file holds this many bytes (drawn per seed, small so checkpoints run).
    pub checkpoint_bytes: u64,
}

impl World {
    /// A partition's batch joins the next round (`ShardJournal::submit`).
    pub(super) fn journal_submit(&mut self, s: usize, upto: u64, base: u64, bytes: Vec<u8>) {
        self.journal.queue.push(Pending {
            s,
            upto,
            base,
            bytes,
        });
        if self.journal.round.is_none() && !self.journal.scheduled {
            self.journal.scheduled = true;
            let inc = self.incarnation;
            // Batches taken at this same instant join the round.
            self.push(self.now, Ev::JournalStart { inc });
        }
    }

    /// The journal task takes every waiting batch as one round.
    pub(super) fn journal_start(&mut self) {
        self.journal.scheduled = false;
        if self.journal.round.is_some() || self.journal.queue.is_empty() {
            return;
        }
        let round = std::mem::take(&mut self.journal.queue);
        self.journal.round = Some(round);
        let mut latency = self.rng.range(0, self.p.fsync_max_ms + 1);
        if self.rng.chance(0.01) {
            latency += self.rng.range(50, 400); // an occasional slow fsync
        }
        let inc = self.incarnation;
        self.push(self.now + latency, Ev::JournalDone { inc });
    }

    /// Write and sync the round (`Journal::append`).
    fn append_round(&mut self, round: &[Pending]) -> std::io::Result<()> {
        let entries: Vec<Entry<'_>> = round
            .iter()
            .map(|p| Entry::Batch {
                partition: self.slots[p.s].partition,
                base_offset: p.base,
                batch: &p.bytes,
            })
            .collect();
        let j = self
            .journal
            .journal
            .as_mut()
            .expect("a running broker has a journal");
        block_on(j.append(&entries))
    }

    /// The round's sync returned: its batches are durable (or all failed). A batch whose
    /// segment write has not run yet becomes durable when it does.
    pub(super) fn journal_done(&mut self) {
        let Some(round) = self.journal.round.take() else {
            return;
        };
        let result = self.append_round(&round);
        self.trace(|| format!("journal round of {} batches -> {result:?}", round.len()));
        for p in &round {
            // The batch may have failed already (its segment write did): nothing waits here.
            let mine = self.slots[p.s]
                .in_flight
                .as_ref()
                .is_some_and(|b| b.upto == p.upto);
            if !mine {
                continue;
            }
            match &result {
                Ok(()) => {
                    let b = self.slots[p.s].in_flight.as_mut().expect("checked");
                    b.journaled = true;
                    if b.bytes.is_none() {
                        let batch = self.slots[p.s].in_flight.take().expect("checked");
                        self.batch_durable(p.s, batch);
                    }
                }
                Err(e) => {
                    let e = std::io::Error::other(e.to_string());
                    let batch = self.slots[p.s].in_flight.take().expect("checked");
                    self.batch_failed(p.s, batch, e);
                }
            }
        }
        if result.is_ok() {
            self.stats.journal_rounds += 1;
            self.maybe_checkpoint();
        }
        if !self.journal.queue.is_empty() && !self.journal.scheduled {
            self.journal.scheduled = true;
            let inc = self.incarnation;
            self.push(self.now, Ev::JournalStart { inc });
        }
    }

    /// A segment write ended (`ShardJournal::end_segment_write`): mark its segment for the
    /// checkpoint, and start a checkpoint that waited for it.
    pub(super) fn end_segment_write(&mut self, epoch: u64, s: usize, segment: Option<String>) {
        if let Some(segment) = segment {
            self.journal.dirty.insert(s, segment);
        }
        let n = self
            .journal
            .writing
            .get_mut(&epoch)
            .expect("a write begun is counted");
        *n -= 1;
        if *n == 0 {
            self.journal.writing.remove(&epoch);
        }
        self.maybe_start_checkpoint();
    }

    fn maybe_start_checkpoint(&mut self) {
        let Some((upto, epoch)) = self.journal.checkpoint_waiting else {
            return;
        };
        if self.journal.writing.range(..=epoch).next().is_some() {
            return;
        }
        self.journal.checkpoint_waiting = None;
        let dirty = std::mem::take(&mut self.journal.dirty);
        self.journal.checkpoint = Some((upto, dirty));
        let latency = self.rng.range(0, 4 * self.p.fsync_max_ms + 1);
        let inc = self.incarnation;
        self.push(self.now + latency, Ev::CheckpointDone { inc });
    }

    /// Past its bound, the journal starts a new generation; its checkpoint syncs the segments
    /// written before it once the segment writes begun before it ended (`runtime::journal::run`).
    fn maybe_checkpoint(&mut self) {
        if self.journal.checkpoint.is_some() || self.journal.checkpoint_waiting.is_some() {
            return;
        }
        let bound = self.journal.checkpoint_bytes;
        let j = self.journal.journal.as_mut().expect("running");
        if !j.checkpoint_due(bound) {
            return;
        }
        let upto = j.generation();
        match block_on(j.rotate()) {
            Ok(()) => {
                let epoch = self.journal.epoch;
                self.journal.epoch += 1;
                self.journal.checkpoint_waiting = Some((upto, epoch));
                self.trace(|| format!("journal rotated after generation {upto}"));
                self.maybe_start_checkpoint();
            }
            Err(e) => self.trace(|| format!("journal rotation failed: {e}")),
        }
    }

    /// The checkpoint's segment syncs ran; on success the covered generations go.
    pub(super) fn checkpoint_done(&mut self) {
        let Some((upto, dirty)) = self.journal.checkpoint.take() else {
            return;
        };
        let mut ok = true;
        for (&s, segment) in &dirty {
            if block_on(self.slots[s].dir.sync_file(segment)).is_err() {
                ok = false;
                break;
            }
        }
        if ok {
            let j = self.journal.journal.as_mut().expect("running");
            let removed = block_on(j.remove_older(upto));
            self.stats.checkpoints += 1;
            self.trace(|| format!("journal checkpoint up to generation {upto}: {removed:?}"));
        } else {
            for (s, seg) in dirty {
                self.journal.dirty.entry(s).or_insert(seg);
            }
            self.trace(|| format!("journal checkpoint of generation {upto} failed"));
        }
    }

    /// A reloaded partition journals its cut before it serves again (`reload_until_ok`).
    pub(super) fn journal_cut(&mut self, s: usize, offset: u64) -> std::io::Result<()> {
        let partition = self.slots[s].partition;
        let j = self.journal.journal.as_mut().expect("running");
        block_on(j.append(&[Entry::Cut { partition, offset }]))
    }

    /// Power loss: the round in flight lands partly or not at all, a checkpoint in flight synced
    /// some of its segments, and the journal's unsynced bytes tear.
    pub(super) fn journal_crash(&mut self) {
        if let Some(round) = self.journal.round.take() {
            let ops = self.rng.below(3);
            self.journal.dir.fail_after(ops);
            let _ = self.append_round(&round);
        }
        if let Some((_, dirty)) = self.journal.checkpoint.take() {
            let n = self.rng.below(dirty.len() as u64 + 1) as usize;
            for (&s, seg) in dirty.iter().take(n) {
                let _ = block_on(self.slots[s].dir.sync_file(seg));
            }
        }
        let mode = self.rng.below(4);
        let mut rng = self.rng.clone();
        self.journal.dir.crash(|_, unsynced| match mode {
            0 => 0,
            1 => unsynced,
            _ => rng.below(unsynced as u64 + 1) as usize,
        });
        self.rng = rng;
        self.journal.journal = None;
        self.journal.queue.clear();
        self.journal.scheduled = false;
        self.journal.dirty.clear();
        self.journal.writing.clear();
        self.journal.checkpoint_waiting = None;
        self.journal.failing = false;
    }

    /// Start: bring the partition logs up to date with the journal files (the broker's
    /// `recover_before_start`), then start an empty journal.
    pub(super) fn journal_recover_and_start(&mut self) {
        let dirs: Vec<MemDir> = self.slots.iter().map(|s| s.dir.clone()).collect();
        let cfg = self.p.log_cfg.clone();
        match block_on(storage::journal::recover(
            &self.journal.dir,
            |p| {
                dirs.get(p as usize)
                    .cloned()
                    .ok_or_else(|| std::io::Error::other(format!("no partition {p}")))
            },
            &cfg,
        )) {
            Ok(report) => {
                self.stats.journal_batches_recovered += report.batches_applied;
                self.trace(|| format!("journal recovery: {report:?}"));
            }
            Err(e) => {
                return self.fail(format!("journal recovery failed after a restart: {e}"));
            }
        }
        match block_on(Journal::create(self.journal.dir.clone(), 0, 1)) {
            Ok(j) => self.journal.journal = Some(j),
            Err(e) => self.fail(format!("starting the journal failed: {e}")),
        }
    }

    pub(super) fn journal_fault(&mut self) {
        if !self.broker_up || self.journal.failing {
            return;
        }
        self.stats.disk_faults += 1;
        let ops = self.rng.below(4);
        self.journal.dir.fail_after(ops);
        self.journal.failing = true;
        let heal = self.rng.range(1, self.p.heal_max_ms + 1);
        let inc = self.incarnation;
        self.push(self.now + heal, Ev::JournalHeal { inc });
        self.trace(|| format!("journal disk fails after {ops} more operations"));
    }

    pub(super) fn journal_heal(&mut self) {
        self.journal.dir.heal();
        self.journal.failing = false;
    }
}
