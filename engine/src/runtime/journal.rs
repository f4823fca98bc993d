//! The shard's journal task: one durable point for every `__consumer_offsets` partition the
//! shard owns (`storage::journal` has the format, the recovery and why).
//!
//! A partition's writer writes its batch to its segment file without syncing it and hands the
//! bytes here ([`ShardJournal::write`]); this task writes everything handed to it since its
//! last round as one append with one fdatasync, then wakes every writer of the round. While a
//! round is on its way to the disk the next one gathers, so the number of partitions a sync
//! covers adapts to the load (group commit across partitions). When the journal file passes
//! `storage::journal::CHECKPOINT_BYTES` the task starts a new generation and a checkpoint task
//! syncs every segment written before it, after which the older generations are removed.
//!
//! Must not: decide what a partition writes or when a reply leaves (the partition core does), or
//! acknowledge anything before its round's sync returned.

use crate::oneshot::OneShot;
use std::cell::{Cell, RefCell};
use std::collections::BTreeMap;
use std::io;
use std::rc::Rc;
use storage::io::{GlommioDir, LogDir};
use storage::journal::{Entry, Journal, CHECKPOINT_BYTES};

/// Where the journal files live, under the data directory.
pub const JOURNAL_DIR: &str = "__consumer_offsets-journal";

/// What one partition hands to a round.
#[derive(Debug)]
pub enum Payload {
    /// A batch written (unsynced) to the partition's segment at `base_offset`.
    Batch { base_offset: u64, bytes: Vec<u8> },
    /// The partition's log was cut back to `offset` after a failed write.
    Cut { offset: u64 },
}

/// Where a writer (or the clean stop) waits for its round's outcome.
type Done = Rc<OneShot<Result<(), String>>>;

struct Submission {
    partition: i32,
    payload: Payload,
    done: Done,
}

/// A segment write in progress, counted against the checkpoint epoch it started in.
#[derive(Debug)]
#[must_use = "end_segment_write must be called"]
pub struct SegmentWrite {
    epoch: u64,
}

/// Round figures the task reports, merged into the shard's metrics by the caller's closure.
#[derive(Debug, Clone, Copy)]
pub struct RoundStats {
    pub entries: u64,
    pub bytes: u64,
    pub micros: u64,
    pub ok: bool,
}

pub struct ShardJournal {
    queue: RefCell<Vec<Submission>>,
    doorbell: glommio::channels::local_channel::LocalSender<()>,
    /// Segments written since the last rotation, by partition: (its directory, the segment the
    /// last write went to). Earlier segments of a partition were synced when it rolled.
    dirty: RefCell<BTreeMap<i32, (GlommioDir, String)>>,
    /// Set by a checkpoint whose segment syncs all succeeded: the generation it covers.
    synced_upto: Cell<Option<u64>>,
    checkpointing: Cell<bool>,
    checkpoint_bytes: u64,
    /// A clean stop asked for: once the queue is empty the task syncs every segment, removes
    /// the journal files and ends.
    closing: RefCell<Option<Done>>,
    closed: Cell<bool>,
    /// Checkpoint epoch: bumped at each rotation. Segment writes in progress, by the epoch they
    /// started in; a checkpoint syncs segments only once the writes of earlier epochs ended.
    epoch: Cell<u64>,
    writing: RefCell<BTreeMap<u64, usize>>,
    /// A rotation happened and its checkpoint waits for earlier writes: (generation, epoch).
    checkpoint_waiting: Cell<Option<(u64, u64)>>,
}

impl ShardJournal {
    /// Start the journal task over `journal`, reporting each round to `on_round`.
    pub fn start(
        journal: Journal<GlommioDir>,
        on_round: impl Fn(RoundStats) + 'static,
    ) -> Rc<Self> {
        Self::start_with(journal, CHECKPOINT_BYTES, on_round)
    }

    pub fn start_with(
        journal: Journal<GlommioDir>,
        checkpoint_bytes: u64,
        on_round: impl Fn(RoundStats) + 'static,
    ) -> Rc<Self> {
        let (tx, rx) = glommio::channels::local_channel::new_bounded(1);
        let me = Rc::new(Self {
            queue: RefCell::default(),
            doorbell: tx,
            dirty: RefCell::default(),
            synced_upto: Cell::new(None),
            checkpointing: Cell::new(false),
            checkpoint_bytes: checkpoint_bytes.max(1),
            closing: RefCell::new(None),
            closed: Cell::new(false),
            epoch: Cell::new(0),
            writing: RefCell::default(),
            checkpoint_waiting: Cell::new(None),
        });
        glommio::spawn_local(run(me.clone(), journal, rx, on_round)).detach();
        me
    }

    /// Make `payload` durable in the next round; returns once that round's sync returned (or
    /// failed: then nothing in the round may be acknowledged).
    pub async fn write(&self, partition: i32, payload: Payload) -> io::Result<()> {
        self.submit(partition, payload).await
    }

    /// [`Self::write`] in two steps: the payload joins the queue now (synchronously — so every
    /// writer woken by one round queues its next batch before the journal task takes the next
    /// round), and the returned future waits for its round.
    pub fn submit(
        &self,
        partition: i32,
        payload: Payload,
    ) -> impl std::future::Future<Output = io::Result<()>> + 'static {
        let queued = if self.closed.get() {
            None
        } else {
            let done = OneShot::new();
            self.queue.borrow_mut().push(Submission {
                partition,
                payload,
                done: done.clone(),
            });
            self.ring();
            Some(done)
        };
        async move {
            match queued {
                Some(done) => done.wait().await.map_err(io::Error::other),
                None => Err(io::Error::other("the journal is closed (shutting down)")),
            }
        }
    }

    /// A segment write is about to start, for a batch already submitted: a checkpoint that
    /// rotates meanwhile must wait for it (the segment sync must come after the write).
    pub fn begin_segment_write(&self) -> SegmentWrite {
        let epoch = self.epoch.get();
        *self.writing.borrow_mut().entry(epoch).or_default() += 1;
        SegmentWrite { epoch }
    }

    /// The segment write `w` ended; `segment` is where it went (`None` if it failed: the batch
    /// fails and its cut is journaled, so the segment need not be synced for it).
    pub fn end_segment_write(
        &self,
        w: SegmentWrite,
        partition: i32,
        dir: &GlommioDir,
        segment: Option<String>,
    ) {
        if let Some(segment) = segment {
            self.mark_dirty(partition, dir, segment);
        }
        let mut writing = self.writing.borrow_mut();
        let n = writing.get_mut(&w.epoch).expect("a write begun is counted");
        *n -= 1;
        if *n == 0 {
            writing.remove(&w.epoch);
            drop(writing);
            self.ring(); // a checkpoint may be waiting for it
        }
    }

    /// A write went to `segment` of `partition`'s log in `dir`: a checkpoint must sync it before
    /// the journal that covers it is removed.
    pub fn mark_dirty(&self, partition: i32, dir: &GlommioDir, segment: String) {
        let mut dirty = self.dirty.borrow_mut();
        match dirty.get_mut(&partition) {
            Some(d) if d.1 == segment => {}
            Some(d) => d.1 = segment,
            None => {
                dirty.insert(partition, (dir.clone(), segment));
            }
        }
    }

    /// A clean stop: after the rounds already asked for, sync every segment written and remove
    /// the journal files (a cleanly stopped broker needs no journal to start again). Writes
    /// asked for after this fail.
    pub async fn close(&self) -> io::Result<()> {
        let done = OneShot::new();
        *self.closing.borrow_mut() = Some(done.clone());
        self.ring();
        done.wait().await.map_err(io::Error::other)
    }

    /// Start the checkpoint of a rotation once every segment write that began before it ended
    /// (their batches are in the generations it removes, and their bytes must be in the files
    /// it syncs). The segments marked by then are the ones it syncs.
    fn maybe_start_checkpoint(self: &Rc<Self>) {
        let Some((upto, epoch)) = self.checkpoint_waiting.get() else {
            return;
        };
        if self.writing.borrow().range(..=epoch).next().is_some() {
            return; // end_segment_write rings when the last one ends
        }
        self.checkpoint_waiting.set(None);
        let dirty = std::mem::take(&mut *self.dirty.borrow_mut());
        glommio::spawn_local(checkpoint(self.clone(), dirty, upto)).detach();
    }

    fn ring(&self) {
        let _ = self.doorbell.try_send(()); // full = the task is already due to look
    }
}

async fn run(
    me: Rc<ShardJournal>,
    mut journal: Journal<GlommioDir>,
    doorbell: glommio::channels::local_channel::LocalReceiver<()>,
    on_round: impl Fn(RoundStats),
) {
    loop {
        if let Some(upto) = me.synced_upto.take() {
            match journal.remove_older(upto).await {
                Ok(n) => tracing::debug!(generation = upto, files = n, "journal checkpoint done"),
                Err(e) => {
                    // The files stay; the next checkpoint removes them.
                    tracing::warn!(error = %e, "removing checkpointed journal files failed")
                }
            }
            me.checkpointing.set(false);
        }
        me.maybe_start_checkpoint();
        let subs = std::mem::take(&mut *me.queue.borrow_mut());
        if subs.is_empty() {
            if me.closing.borrow().is_some()
                && !me.checkpointing.get()
                && me.writing.borrow().is_empty()
            {
                let done = me.closing.borrow_mut().take().expect("checked");
                let result = close(&me, journal).await;
                if let Err(e) = &result {
                    tracing::warn!(error = %e, "closing the journal failed; the next start recovers from it");
                }
                done.complete(result.map_err(|e| e.to_string()));
                // Writes asked for from now on fail: the journal is gone.
                for s in std::mem::take(&mut *me.queue.borrow_mut()) {
                    s.done
                        .complete(Err("the journal is closed (shutting down)".into()));
                }
                me.closed.set(true);
                return;
            }
            if doorbell.recv().await.is_none() {
                break;
            }
            continue;
        }
        let entries: Vec<Entry<'_>> = subs
            .iter()
            .map(|s| match &s.payload {
                Payload::Batch { base_offset, bytes } => Entry::Batch {
                    partition: s.partition,
                    base_offset: *base_offset,
                    batch: bytes,
                },
                Payload::Cut { offset } => Entry::Cut {
                    partition: s.partition,
                    offset: *offset,
                },
            })
            .collect();
        let bytes: usize = entries.iter().map(Entry::encoded_len).sum();
        let started = std::time::Instant::now();
        let result = journal.append(&entries).await;
        drop(entries);
        on_round(RoundStats {
            entries: subs.len() as u64,
            bytes: bytes as u64,
            micros: (started.elapsed().as_micros() as u64).max(1),
            ok: result.is_ok(),
        });
        let outcome = result.map_err(|e| e.to_string());
        if let Err(e) = &outcome {
            tracing::error!(error = %e, entries = subs.len(), "journal write failed; the round's requests fail");
        }
        for s in subs {
            s.done.complete(outcome.clone());
        }
        if !me.checkpointing.get() && journal.checkpoint_due(me.checkpoint_bytes) {
            let upto = journal.generation();
            match journal.rotate().await {
                Ok(()) => {
                    me.checkpointing.set(true);
                    let epoch = me.epoch.get();
                    me.epoch.set(epoch + 1);
                    me.checkpoint_waiting.set(Some((upto, epoch)));
                }
                Err(e) => {
                    tracing::warn!(error = %e, "starting a new journal generation failed; retrying after the next round")
                }
            }
        }
        me.maybe_start_checkpoint();
    }
}

/// The clean stop's last step: sync every segment written since the last checkpoint, then remove
/// every journal file.
async fn close(me: &ShardJournal, journal: Journal<GlommioDir>) -> io::Result<()> {
    let dirty = std::mem::take(&mut *me.dirty.borrow_mut());
    for (dir, segment) in dirty.values() {
        dir.sync_file(segment).await?;
    }
    journal.close().await
}

/// Sync every segment written before the rotation to `upto + 1`; then the generations up to
/// `upto` may go. Every batch in them was written to its segment before its round (a writer
/// writes the segment first), so these syncs make all of them durable in the segments.
async fn checkpoint(me: Rc<ShardJournal>, dirty: BTreeMap<i32, (GlommioDir, String)>, upto: u64) {
    let started = std::time::Instant::now();
    let mut failed = None;
    for (dir, segment) in dirty.values() {
        if let Err(e) = dir.sync_file(segment).await {
            failed = Some(e);
            break;
        }
    }
    match failed {
        None => {
            tracing::info!(
                generation = upto,
                segments = dirty.len(),
                millis = started.elapsed().as_millis() as u64,
                "journal checkpoint: segments synced"
            );
            me.synced_upto.set(Some(upto));
        }
        Some(e) => {
            tracing::warn!(error = %e, "journal checkpoint failed; the journal keeps covering those segments");
            // Put them back (a newer write of the same partition stays as it is): the next
            // checkpoint syncs them and removes every older generation.
            let mut d = me.dirty.borrow_mut();
            for (p, v) in dirty {
                d.entry(p).or_insert(v);
            }
            me.checkpointing.set(false);
        }
    }
    me.ring();
}

/// Before any shard starts: bring every `__consumer_offsets` partition log in `data_dir` up to
/// date with the journal files a previous run left (`storage::journal::recover`), sync them, and
/// remove the journal files, so that each shard starts an empty journal of its own. Runs on a
/// short-lived executor of its own (the storage code is io_uring-based) and blocks until done.
/// A journaled batch that starts past the end of its log is lost data no file covers: start-up
/// stops with that message rather than run without it.
pub fn recover_before_start(
    data_dir: &std::path::Path,
    partitions: i32,
    log_config: storage::log::LogConfig,
) -> anyhow::Result<()> {
    let journal_dir = data_dir.join(JOURNAL_DIR);
    if !journal_dir.exists() {
        return Ok(());
    }
    let data_dir = data_dir.to_path_buf();
    let started = std::time::Instant::now();
    let handle = glommio::LocalExecutorBuilder::new(glommio::Placement::Unbound)
        .name("journal-recovery")
        .spawn(move || async move {
            let jdir = GlommioDir::new(&journal_dir)?;
            storage::journal::recover(
                &jdir,
                |p| {
                    if p >= partitions {
                        return Err(io::Error::other(format!(
                            "the journal has records of __consumer_offsets-{p}, but \
                             offsets.topic.num.partitions is {partitions}"
                        )));
                    }
                    GlommioDir::new(data_dir.join(format!("__consumer_offsets-{p}")))
                },
                &log_config,
            )
            .await
        })
        .map_err(|e| anyhow::anyhow!("starting journal recovery: {e}"))?;
    let report = handle
        .join()
        .map_err(|e| anyhow::anyhow!("journal recovery: {e}"))?
        .map_err(|e| anyhow::anyhow!("journal recovery: {e}"))?;
    if report.files > 0 {
        tracing::info!(
            files = report.files,
            entries = report.entries,
            batches_applied = report.batches_applied,
            batches_present = report.batches_present,
            cuts_applied = report.cuts_applied,
            bytes_applied = report.bytes_applied,
            partitions = report.partitions,
            millis = started.elapsed().as_millis() as u64,
            "recovered the __consumer_offsets journal"
        );
    }
    for (partition, segment, pos, why) in &report.truncated {
        tracing::warn!(partition, segment = %segment, position = pos, reason = %why, "truncated a torn or corrupt log tail");
    }
    for (file, pos, why) in &report.torn {
        tracing::warn!(file = %file, position = pos, reason = %why, "journal file ends in a torn or corrupt entry (an unacknowledged round)");
    }
    Ok(())
}
