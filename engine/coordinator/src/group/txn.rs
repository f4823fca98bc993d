//! Transactional offset commits (TxnOffsetCommit) and the transaction markers that end them:
//! the offsets half of Kafka transactions (issue 17).
//!
//! A TxnOffsetCommit writes ordinary OffsetCommit records, in a *transactional* batch that
//! carries the producer id and epoch. Replayed, they do not touch the committed offsets: they
//! wait here, per producer, invisible to OffsetFetch, until the transaction coordinator sends
//! the transaction's end — a marker written as a control batch. COMMIT moves the producer's
//! pending offsets into the committed ones, ABORT drops them. This follows Kafka's
//! `OffsetMetadataManager` (`pendingTransactionalOffsets`, `openTransactionsByGroup`,
//! `replay` with a producer id, `replayEndTransactionMarker`,
//! `group-coordinator/src/main/java/org/apache/kafka/coordinator/group/OffsetMetadataManager.java`).
//!
//! **Which offset wins at COMMIT.** Kafka keeps, for each committed offset and each pending
//! one, the log offset of its record, and a pending offset is materialised only if its record
//! is later in the log than the record of the committed offset it would replace ("we always
//! keep the most recent committed offset when we have a mix of transactional and regular
//! offset commits"). The coordinator here does not see log offsets, and does not need them:
//! records are replayed in log order, so each pending offset keeps an `order` (its position
//! among pending records) and a `stale` flag, set when a committed offset written after it
//! lands on the same partition — a plain commit always comes later than every pending record,
//! a materialised one later than the pending records with a smaller `order`. A stale pending
//! offset is dropped at COMMIT, exactly when Kafka's record-offset comparison would skip it.
//! Snapshots carry `order` (as record order) and `stale` explicitly (see
//! [`Coordinator::snapshot_txn_records`]).
//!
//! A tombstone of a partition (OffsetDelete, DeleteGroups, expiry) also deletes the pending
//! offsets of that partition; the transaction stays open for the group until its marker
//! (Kafka keeps the producer in `openTransactionsByGroup`).

use super::{ensure_group, err, Coordinator, Output, RequestContext};
use kafka_protocol::messages::txn_offset_commit_response::{
    TxnOffsetCommitResponsePartition, TxnOffsetCommitResponseTopic,
};
use kafka_protocol::messages::*;
use kafka_protocol::ResponseError;
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::atomic::{AtomicU64, Ordering};
use wire::records::{OffsetCommitValue, Record, RecordKey, RecordValue};

/// What ties a TxnOffsetCommit's write to the verification that let it through (Kafka's
/// `VerificationGuard`, `storage/src/main/java/org/apache/kafka/storage/internals/log/
/// VerificationGuard.java`, and the "ABA problem" comment in `UnifiedLog.scala`). The api asks
/// the group's partition for one ([`GroupRequest::TxnGuard`](super::GroupRequest::TxnGuard))
/// before the transaction coordinator verifies (or adds) the partition, and hands it back with
/// the write; the write is accepted only if the guard still stands for the same transaction:
///
/// * the producer had an open transaction here when the verification began: the guard is that
///   open transaction's serial, and the write needs that same transaction still open (Kafka's
///   sentinel guard, made exact: a later transaction of the same producer id and epoch — as
///   transactions v1 reuse them — has another serial);
/// * otherwise a fresh guard is stored for the producer (one per producer id, reused by
///   concurrent verifications, as `maybeCreateVerificationStateEntry` does); the write that
///   matches it consumes it and opens the transaction under its serial. A transaction marker
///   for the producer drops it, so a write verified before an ABORT that lands after it is
///   refused instead of becoming pending offsets of no open transaction.
///
/// Guards are unique in the process (Kafka's `VerificationGuard` counter is static too), so a
/// guard from before a reload of the partition never matches one issued after it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct TxnGuard(pub u64);

impl TxnGuard {
    /// Matches nothing: a write without a verification.
    pub const NONE: TxnGuard = TxnGuard(0);
}

static NEXT_SERIAL: AtomicU64 = AtomicU64::new(1);

fn fresh_serial() -> u64 {
    NEXT_SERIAL.fetch_add(1, Ordering::Relaxed)
}

/// Most guards a partition holds for producers with no open transaction here; beyond it a new
/// verification is refused with a retriable CONCURRENT_TRANSACTIONS (the api answers it as
/// COORDINATOR_NOT_AVAILABLE). A guard lives from the verification to its write or the
/// producer's marker, so only producers verifying at the same moment — or ones whose
/// verification failed and that never came back — hold one.
pub const MAX_GUARDS: usize = 65_536;

/// What a batch of records is, when it is not a plain coordinator batch: the shells write it
/// with the transactional or control attributes and the producer fields
/// (`partition_core::encode_batch`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TxnWrite {
    /// The output's records are `producer_id`'s transactional offset commits.
    Offsets {
        producer_id: i64,
        producer_epoch: i16,
    },
    /// The end of `producer_id`'s transaction: one control record, no coordinator records.
    Marker {
        producer_id: i64,
        producer_epoch: i16,
        commit: bool,
        coordinator_epoch: i32,
    },
}

/// Batch attributes bit 4 (transactional) and bit 5 (control).
pub const ATTR_TRANSACTIONAL: i16 = 0x10;
pub const ATTR_CONTROL: i16 = 0x20;

impl TxnWrite {
    /// (attributes, producer id, producer epoch) of the batch that carries it.
    pub fn batch_fields(&self) -> (i16, i64, i16) {
        match *self {
            TxnWrite::Offsets {
                producer_id,
                producer_epoch,
            } => (ATTR_TRANSACTIONAL, producer_id, producer_epoch),
            TxnWrite::Marker {
                producer_id,
                producer_epoch,
                ..
            } => (
                ATTR_TRANSACTIONAL | ATTR_CONTROL,
                producer_id,
                producer_epoch,
            ),
        }
    }
}

/// The control record of an end-transaction marker (`EndTransactionMarker`,
/// `ControlRecordType`): key = version int16 0, type int16 (0 ABORT, 1 COMMIT); value =
/// version int16 0, coordinator epoch int32.
pub fn encode_marker(commit: bool, coordinator_epoch: i32) -> (Vec<u8>, Vec<u8>) {
    let mut key = Vec::with_capacity(4);
    key.extend_from_slice(&0i16.to_be_bytes());
    key.extend_from_slice(&(commit as i16).to_be_bytes());
    let mut value = Vec::with_capacity(6);
    value.extend_from_slice(&0i16.to_be_bytes());
    value.extend_from_slice(&coordinator_epoch.to_be_bytes());
    (key, value)
}

/// The result a control record's key names: `Some(true)` COMMIT, `Some(false)` ABORT, `None`
/// for another control type or bytes that are not a control key.
pub fn decode_marker(key: &[u8]) -> Option<bool> {
    if key.len() != 4 || i16::from_be_bytes([key[0], key[1]]) < 0 {
        return None;
    }
    match i16::from_be_bytes([key[2], key[3]]) {
        0 => Some(false),
        1 => Some(true),
        _ => None,
    }
}

/// One pending transactional offset.
#[derive(Debug, Clone, PartialEq)]
pub struct PendingOffset {
    pub value: OffsetCommitValue,
    /// Position among pending records (later records have larger ones).
    pub order: u64,
    /// A committed offset written after this one landed on its partition: COMMIT skips it.
    pub stale: bool,
}

type Tp = (String, i32);

/// One producer's open transaction.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct OpenTxn {
    pub producer_epoch: i16,
    /// Groups it committed offsets for (it stays open in them until its marker).
    pub groups: BTreeSet<String>,
    /// group → (topic, partition) → pending offset.
    pub offsets: BTreeMap<String, BTreeMap<Tp, PendingOffset>>,
}

/// Every open transaction of the partition.
#[derive(Debug, Clone, Default)]
pub struct TxnOffsets {
    pub by_producer: BTreeMap<i64, OpenTxn>,
    /// group → producers with an open transaction in it (`openTransactionsByGroup`).
    pub by_group: HashMap<String, BTreeSet<i64>>,
    next_order: u64,
    /// The serial of each open transaction (see [`TxnGuard`]); not durable: a reload gives the
    /// replayed transactions new ones.
    serials: HashMap<i64, u64>,
    /// Guards of verifications under way for producers with no open transaction here (at most
    /// [`MAX_GUARDS`]); not durable.
    guards: HashMap<i64, u64>,
}

impl TxnOffsets {
    /// No open transaction: the hooks on plain commits cost one branch.
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.by_producer.is_empty()
    }

    /// `hasPendingTransactionalOffsets`.
    pub fn has_pending(&self, group: &str, topic: &str, partition: i32) -> bool {
        let Some(pids) = self.by_group.get(group) else {
            return false;
        };
        let tp = (topic.to_string(), partition);
        pids.iter().any(|pid| {
            self.by_producer
                .get(pid)
                .and_then(|t| t.offsets.get(group))
                .is_some_and(|m| m.contains_key(&tp))
        })
    }

    /// Whether `group` has an open transaction (`openTransactionsByGroup.containsKey`).
    pub fn has_open(&self, group: &str) -> bool {
        self.by_group.contains_key(group)
    }

    /// The pending offsets `group` has, any producer: (topic, partition).
    pub fn pending_of_group(&self, group: &str) -> BTreeSet<Tp> {
        let mut out = BTreeSet::new();
        for pid in self.by_group.get(group).into_iter().flatten() {
            if let Some(m) = self.by_producer.get(pid).and_then(|t| t.offsets.get(group)) {
                out.extend(m.keys().cloned());
            }
        }
        out
    }

    /// A producer's pending offset (tests and tools).
    pub fn pending(
        &self,
        producer_id: i64,
        group: &str,
        topic: &str,
        partition: i32,
    ) -> Option<&PendingOffset> {
        self.by_producer
            .get(&producer_id)?
            .offsets
            .get(group)?
            .get(&(topic.to_string(), partition))
    }

    /// Begin a verification for `producer_id` (`UnifiedLog.maybeStartTransactionVerification`):
    /// the guard its write must carry, or CONCURRENT_TRANSACTIONS if [`MAX_GUARDS`] producers
    /// already hold one. Writes nothing.
    pub fn begin_guard(&mut self, producer_id: i64) -> Result<TxnGuard, i16> {
        if self.by_producer.contains_key(&producer_id) {
            let serial = *self.serials.entry(producer_id).or_insert_with(fresh_serial);
            return Ok(TxnGuard(serial));
        }
        if let Some(&g) = self.guards.get(&producer_id) {
            return Ok(TxnGuard(g));
        }
        if self.guards.len() >= MAX_GUARDS {
            return Err(err(ResponseError::ConcurrentTransactions));
        }
        let g = fresh_serial();
        self.guards.insert(producer_id, g);
        Ok(TxnGuard(g))
    }

    /// Whether a write of `producer_id` carrying `guard` may land (`UnifiedLog.analyzeAndValidate
    /// ProducerState`'s check: an ongoing transaction, or a matching verification guard).
    pub fn guard_ok(&self, producer_id: i64, guard: TxnGuard) -> bool {
        if self.by_producer.contains_key(&producer_id) {
            return self.serials.get(&producer_id) == Some(&guard.0);
        }
        guard != TxnGuard::NONE && self.guards.get(&producer_id) == Some(&guard.0)
    }

    /// Guards held (tests and metrics).
    pub fn guards_len(&self) -> usize {
        self.guards.len()
    }

    /// A transactional record was replayed: it is pending for `producer_id` (several commits
    /// of one producer merge, the last one wins).
    fn put(
        &mut self,
        producer_id: i64,
        producer_epoch: i16,
        group: &str,
        topic: &str,
        partition: i32,
        value: OffsetCommitValue,
        stale: bool,
    ) {
        let order = self.next_order;
        self.next_order += 1;
        if !self.by_producer.contains_key(&producer_id) {
            // A write that matched its guard opens the transaction under the guard's serial
            // (so the requests that share the guard still match); a replayed one, a new serial.
            let serial = self
                .guards
                .remove(&producer_id)
                .unwrap_or_else(fresh_serial);
            self.serials.insert(producer_id, serial);
        }
        let t = self.by_producer.entry(producer_id).or_default();
        t.producer_epoch = t.producer_epoch.max(producer_epoch);
        if !t.groups.contains(group) {
            t.groups.insert(group.to_string());
        }
        t.offsets.entry(group.to_string()).or_default().insert(
            (topic.to_string(), partition),
            PendingOffset {
                value,
                order,
                stale,
            },
        );
        self.by_group
            .entry(group.to_string())
            .or_default()
            .insert(producer_id);
    }

    /// A committed offset landed on (group, topic, partition): pending offsets written before
    /// it (`order` below `before`, or all of them for a plain commit) lose at COMMIT.
    pub fn on_committed(&mut self, group: &str, topic: &str, partition: i32, before: u64) {
        let Some(pids) = self.by_group.get(group) else {
            return;
        };
        let tp = (topic.to_string(), partition);
        for pid in pids {
            if let Some(p) = self
                .by_producer
                .get_mut(pid)
                .and_then(|t| t.offsets.get_mut(group))
                .and_then(|m| m.get_mut(&tp))
            {
                if p.order < before {
                    p.stale = true;
                }
            }
        }
    }

    /// A tombstone of (group, topic, partition) deletes its pending offsets too.
    pub fn on_tombstone(&mut self, group: &str, topic: &str, partition: i32) {
        let Some(pids) = self.by_group.get(group) else {
            return;
        };
        let tp = (topic.to_string(), partition);
        for pid in pids {
            if let Some(t) = self.by_producer.get_mut(pid) {
                if let Some(m) = t.offsets.get_mut(group) {
                    m.remove(&tp);
                    if m.is_empty() {
                        t.offsets.remove(group);
                    }
                }
            }
        }
    }

    /// The producer's transaction ended: its open transaction, removed.
    fn end(&mut self, producer_id: i64) -> Option<OpenTxn> {
        // Whatever verification was under way belonged to the transaction that just ended.
        self.guards.remove(&producer_id);
        self.serials.remove(&producer_id);
        let t = self.by_producer.remove(&producer_id)?;
        for g in &t.groups {
            if let Some(pids) = self.by_group.get_mut(g) {
                pids.remove(&producer_id);
                if pids.is_empty() {
                    self.by_group.remove(g);
                }
            }
        }
        Some(t)
    }
}

impl Coordinator {
    /// Replay one record of a transactional batch of `producer_id`: an offset commit becomes
    /// pending (`OffsetMetadataManager.replay` with a producer id); a tombstone acts as
    /// everywhere. Returns false for a record that does not decode.
    pub fn replay_txn_record(
        &mut self,
        producer_id: i64,
        producer_epoch: i16,
        key: &[u8],
        value: Option<&[u8]>,
    ) -> bool {
        let Ok(record) = Record::decode(key, value) else {
            return false;
        };
        match (&record.key, record.value) {
            (
                RecordKey::OffsetCommit {
                    group,
                    topic,
                    partition,
                },
                Some(RecordValue::OffsetCommit(v)),
            ) => {
                self.bump_load_epoch();
                ensure_group(
                    &mut self.groups,
                    &self.consumer_groups,
                    group,
                    v.commit_timestamp,
                );
                self.txn.put(
                    producer_id,
                    producer_epoch,
                    group,
                    topic,
                    *partition,
                    v,
                    false,
                );
            }
            (_, value) => self.replay(&Record {
                key: record.key.clone(),
                value,
            }),
        }
        true
    }

    /// Replay an end-transaction marker (`replayEndTransactionMarker`): on COMMIT each pending
    /// offset of the producer that is not stale becomes the committed offset, and pending
    /// offsets of other producers written before it become stale; ABORT drops them. A marker
    /// for a producer with nothing pending changes nothing.
    pub fn replay_marker(&mut self, producer_id: i64, commit: bool) {
        let Some(t) = self.txn.end(producer_id) else {
            return;
        };
        if !commit {
            return;
        }
        self.bump_load_epoch();
        for (group, offsets) in t.offsets {
            for ((topic, partition), p) in offsets {
                if p.stale {
                    continue;
                }
                ensure_group(
                    &mut self.groups,
                    &self.consumer_groups,
                    &group,
                    p.value.commit_timestamp,
                );
                self.offsets.put(&group, &topic, partition, p.value);
                self.txn.on_committed(&group, &topic, partition, p.order);
            }
        }
    }

    /// The pending transactional offsets as snapshot records, in `order`: key = int16
    /// [`SNAPSHOT_PENDING_TYPE`], producer id int64, producer epoch int16, stale int8, then the
    /// OffsetCommit key bytes; value = the OffsetCommit value bytes. Only snapshots hold them
    /// (the type is Ringleader's own, never in a log); they replay after every committed
    /// offset of the snapshot (see `snapshot_build`).
    pub fn snapshot_txn_records(&self) -> anyhow::Result<Vec<(Vec<u8>, Vec<u8>)>> {
        let mut all = Vec::new();
        for (pid, t) in &self.txn.by_producer {
            for (group, offsets) in &t.offsets {
                for ((topic, partition), p) in offsets {
                    all.push((p.order, *pid, t.producer_epoch, group, topic, *partition, p));
                }
            }
        }
        all.sort_by_key(|x| x.0);
        let mut out = Vec::with_capacity(all.len());
        for (_, pid, epoch, group, topic, partition, p) in all {
            let record = Record {
                key: RecordKey::OffsetCommit {
                    group: group.clone(),
                    topic: topic.clone(),
                    partition,
                },
                value: Some(RecordValue::OffsetCommit(p.value.clone())),
            };
            let mut key = Vec::new();
            key.extend_from_slice(&SNAPSHOT_PENDING_TYPE.to_be_bytes());
            key.extend_from_slice(&pid.to_be_bytes());
            key.extend_from_slice(&epoch.to_be_bytes());
            key.push(p.stale as u8);
            key.extend_from_slice(&record.encode_key()?);
            let value = record
                .encode_value()?
                .expect("an offset commit has a value");
            out.push((key, value));
        }
        Ok(out)
    }

    /// Replay a snapshot record [`Coordinator::snapshot_txn_records`] wrote; false if `key`
    /// is not one.
    pub(crate) fn replay_snapshot_txn(&mut self, key: &[u8], value: Option<&[u8]>) -> bool {
        if key.len() < 13 || i16::from_be_bytes([key[0], key[1]]) != SNAPSHOT_PENDING_TYPE {
            return false;
        }
        let pid = i64::from_be_bytes(key[2..10].try_into().expect("8 bytes"));
        let epoch = i16::from_be_bytes([key[10], key[11]]);
        let stale = key[12] != 0;
        let Ok(record) = Record::decode(&key[13..], value) else {
            return false;
        };
        let (
            RecordKey::OffsetCommit {
                group,
                topic,
                partition,
            },
            Some(RecordValue::OffsetCommit(v)),
        ) = (record.key, record.value)
        else {
            return false;
        };
        self.bump_load_epoch();
        ensure_group(
            &mut self.groups,
            &self.consumer_groups,
            &group,
            v.commit_timestamp,
        );
        self.txn
            .put(pid, epoch, &group, &topic, partition, v, stale);
        true
    }
}

/// The record type of a pending transactional offset in a snapshot file: Ringleader's own
/// (Kafka's coordinator record types are small and positive).
pub const SNAPSHOT_PENDING_TYPE: i16 = 0x7f01;

/// Group-level validation of a TxnOffsetCommit (`validateTransactionalOffsetCommit`, and the
/// groups' `validateOffsetCommit` with `isTransactional`): as OffsetCommit's, except that a
/// classic group's state is not enforced (no REBALANCE_IN_PROGRESS, and a commit without member
/// id and generation is accepted in any state), an unknown group with a generation is
/// ILLEGAL_GENERATION at every version, no version is required of a consumer-protocol member,
/// and a stale member epoch is ILLEGAL_GENERATION.
fn validate(c: &mut Coordinator, r: &TxnOffsetCommitRequest, now: i64) -> Result<(), i16> {
    let group_id = r.group_id.0.as_str();
    let generation = r.generation_id;
    let member_id = r.member_id.as_str();
    let instance_id = r.group_instance_id.as_deref();
    if let Some(g) = c.consumer_groups.get(group_id) {
        // `ConsumerGroup.validateOffsetCommit`: an epoch below 0 commits to an empty group.
        if generation < 0 && g.members.is_empty() {
            return Ok(());
        }
        let Some(m) = g.members.get(member_id) else {
            return Err(err(ResponseError::UnknownMemberId));
        };
        if generation != m.member_epoch {
            return Err(err(ResponseError::IllegalGeneration));
        }
        return Ok(());
    }
    let Some(g) = c.groups.get(group_id) else {
        if generation < 0 {
            // A simple group, as a plain commit creates one (`getOrMaybeCreateClassicGroup`).
            let mut g = super::classic::ClassicGroup::empty(group_id, now);
            g.protocol_type = None;
            c.groups.insert(group_id.to_string(), g);
            return Ok(());
        }
        return Err(err(ResponseError::IllegalGeneration));
    };
    if g.state == super::classic::State::Dead {
        return Err(err(ResponseError::CoordinatorNotAvailable));
    }
    if generation < 0 && g.state == super::classic::State::Empty {
        return Ok(());
    }
    if generation >= 0 || !member_id.is_empty() || instance_id.is_some() {
        g.validate_member_pub(member_id, instance_id)?;
        if generation != g.generation {
            return Err(err(ResponseError::IllegalGeneration));
        }
    }
    Ok(())
}

/// TxnOffsetCommit for one group (`OffsetMetadataManager.commitTransactionalOffset`): the
/// accepted partitions' records go to `out` as `producer_id`'s transactional batch.
pub fn commit(
    c: &mut Coordinator,
    ctx: &RequestContext,
    r: TxnOffsetCommitRequest,
    guard: TxnGuard,
    now: i64,
    out: &mut Output,
) -> TxnOffsetCommitResponse {
    let producer_id = r.producer_id.0;
    let producer_epoch = r.producer_epoch;
    let mut group_error = validate(c, &r, now).err();
    // A write from an epoch older than the one the producer's open transaction has here is
    // from a fenced producer (Kafka's log refuses it: `ProducerStateManager`).
    if group_error.is_none()
        && c.txn
            .by_producer
            .get(&producer_id)
            .is_some_and(|t| producer_epoch < t.producer_epoch)
    {
        group_error = Some(err(ResponseError::InvalidProducerEpoch));
    }
    let group_id = r.group_id.0.to_string();
    let max_metadata = c.config.offset_metadata_max_bytes.max(0) as usize;
    let mut resp = TxnOffsetCommitResponse::default();
    let mut records = Vec::new();
    for t in r.topics {
        let topic = t.name.0.to_string();
        let known = ctx.topics.get(&topic).map(|x| x.partitions);
        let topic_id = ctx.topics.get(&topic).map_or(uuid::Uuid::nil(), |x| x.id);
        let mut rt = TxnOffsetCommitResponseTopic::default().with_name(t.name.clone());
        for p in t.partitions {
            let metadata = p
                .committed_metadata
                .as_ref()
                .map(|m| m.to_string())
                .unwrap_or_default();
            let code = if let Some(code) = group_error {
                code
            } else if !known.is_some_and(|n| p.partition_index >= 0 && p.partition_index < n) {
                // `KafkaApis.handleTxnOffsetCommitRequest` refuses partitions it does not have.
                err(ResponseError::UnknownTopicOrPartition)
            } else if super::offsets::java_len(&metadata) > max_metadata {
                err(ResponseError::OffsetMetadataTooLarge)
            } else {
                records.push(Record {
                    key: RecordKey::OffsetCommit {
                        group: group_id.clone(),
                        topic: topic.clone(),
                        partition: p.partition_index,
                    },
                    value: Some(RecordValue::OffsetCommit(OffsetCommitValue {
                        offset: p.committed_offset,
                        leader_epoch: p.committed_leader_epoch,
                        metadata,
                        commit_timestamp: now,
                        expire_timestamp: -1,
                        topic_id,
                    })),
                });
                0
            };
            rt.partitions.push(
                TxnOffsetCommitResponsePartition::default()
                    .with_partition_index(p.partition_index)
                    .with_error_code(code),
            );
        }
        resp.topics.push(rt);
    }
    if !records.is_empty() && !c.txn.guard_ok(producer_id, guard) {
        // The transaction this write was verified for ended (its marker landed here after the
        // verification) or never was: Kafka's log refuses the append with
        // InvalidTxnStateException "Record was not part of an ongoing transaction"
        // (`UnifiedLog.analyzeAndValidateProducerState`), which reaches the client as
        // INVALID_TXN_STATE at every version (`handleOperationException`, coordinator-common's
        // `CoordinatorOperationExceptionHelper.java`, passes it through).
        records.clear();
        for t in resp.topics.iter_mut() {
            for p in t.partitions.iter_mut() {
                if p.error_code == 0 {
                    p.error_code = err(ResponseError::InvalidTxnState);
                }
            }
        }
    }
    if !records.is_empty() {
        for r in &records {
            let key = r.encode_key().expect("an offset commit key encodes");
            let value = r.encode_value().expect("an offset commit value encodes");
            c.replay_txn_record(producer_id, producer_epoch, &key, value.as_deref());
        }
        debug_assert!(out.records.is_empty() && out.txn.is_none());
        out.records.extend(records);
        out.txn = Some(TxnWrite::Offsets {
            producer_id,
            producer_epoch,
        });
    }
    resp
}

/// A transaction marker for this partition: written as a control record, then applied. A
/// marker older than the producer's open transaction here (a lower producer epoch) is refused
/// with INVALID_PRODUCER_EPOCH and writes nothing.
pub fn marker(
    c: &mut Coordinator,
    producer_id: i64,
    producer_epoch: i16,
    commit: bool,
    coordinator_epoch: i32,
    out: &mut Output,
) -> i16 {
    if c.txn
        .by_producer
        .get(&producer_id)
        .is_some_and(|t| producer_epoch < t.producer_epoch)
    {
        return err(ResponseError::InvalidProducerEpoch);
    }
    c.replay_marker(producer_id, commit);
    debug_assert!(out.records.is_empty() && out.txn.is_none());
    out.txn = Some(TxnWrite::Marker {
        producer_id,
        producer_epoch,
        commit,
        coordinator_epoch,
    });
    0
}
