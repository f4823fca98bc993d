//! The transaction coordinator of one `__transaction_state` partition, as a pure state machine.
//!
//! Owns: every transactional id that hashes to the partition (`abs(java hash) % 50`), its
//! producer id and epoch, its state (Kafka's `TransactionState`), the partitions of its open
//! transaction, and its timeouts. Each transition produces the `TransactionLogValue` record that
//! makes it durable; replaying those records rebuilds the same state.
//!
//! Follows Kafka's transaction coordinator: `core/src/main/scala/kafka/coordinator/transaction/
//! TransactionCoordinator.scala` (the request handlers and their error codes) and
//! `TransactionMetadata.scala` (the transitions), for both transaction protocols (KIP-890):
//! version 1, where the client adds partitions with AddPartitionsToTxn and keeps its epoch
//! across transactions, and version 2, where Produce and TxnOffsetCommit add them (the broker
//! asks the coordinator, [`TxnRequest::AddPartitions`]) and every EndTxn bumps the epoch — the
//! markers carry the bumped epoch, so no late write of the ended transaction is accepted after
//! them, and when the epochs of a producer id run out the transaction ends on a new producer id
//! (`nextProducerId`). Which protocol a transition follows is the client's (EndTxn v5+ is v2,
//! Kafka's `clientTransactionVersion`), or the broker's finalized `transaction.version` for what
//! the coordinator does on its own (aborting on a timeout, fencing), as in Kafka; it is stored
//! with each state (`ClientTransactionVersion`) so a retried EndTxn is judged by the protocol
//! that ended the transaction.
//!
//! The one difference in mechanism: Kafka marks a transition "pending" while its record is
//! being written and answers CONCURRENT_TRANSACTIONS to anything arriving meanwhile. Here a
//! transition is applied at once and every reply the partition gives leaves only after all the
//! records produced before it are durable (the shell's rule, as for groups), so a later request
//! never acts on, or reports, a state that a crash could take back. A failed write reloads the
//! partition from its log.
//!
//! Ending a transaction is three steps: the PrepareCommit/PrepareAbort record (the EndTxn reply
//! leaves once it is durable), the markers written to every partition of the transaction (the
//! shell writes them once the prepare record is durable: [`MarkerJob`]), then the
//! CompleteCommit/CompleteAbort record ([`TxnCoordinator::markers_written`]).
//!
//! Must not: do I/O or read a clock (`now` is passed in), or allocate producer ids (the shell
//! passes a fresh one into InitProducerId).

use std::collections::{BTreeMap, BTreeSet};
use wire::records::txn::{status, TransactionLogValue, TxnTopicPartitions};

/// Kafka's error codes used here (`Errors.java`).
pub mod code {
    pub const NONE: i16 = 0;
    pub const NOT_COORDINATOR: i16 = 16;
    pub const INVALID_PRODUCER_EPOCH: i16 = 47;
    pub const INVALID_TXN_STATE: i16 = 48;
    pub const INVALID_PRODUCER_ID_MAPPING: i16 = 49;
    pub const INVALID_TRANSACTION_TIMEOUT: i16 = 50;
    pub const CONCURRENT_TRANSACTIONS: i16 = 51;
    pub const INVALID_REQUEST: i16 = 42;
    pub const TRANSACTIONAL_ID_NOT_FOUND: i16 = 105;
    pub const PRODUCER_FENCED: i16 = 90;
    pub const TRANSACTION_ABORTABLE: i16 = 120;
    pub const UNKNOWN_SERVER_ERROR: i16 = -1;
}

/// `TransactionVersion.supportsEpochBump`: transactions version 2 and later bump the epoch on
/// every EndTxn.
pub fn supports_epoch_bump(transaction_version: i16) -> bool {
    transaction_version >= 2
}

/// The `__transaction_state` value version written at a finalized `transaction.version`: 0 at
/// level 0, 1 (flexible, with the tagged PreviousProducerId, NextProducerId and
/// ClientTransactionVersion) from level 1 (`TransactionVersion.transactionLogValueVersion`).
/// Both versions are read back.
pub fn log_value_version(transaction_version: i16) -> i16 {
    if transaction_version >= 1 {
        1
    } else {
        0
    }
}

/// A request's id, given back with its reply.
pub type ReqId = u64;

/// Kafka's `TransactionState`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum TxnState {
    Empty,
    Ongoing,
    PrepareCommit,
    PrepareAbort,
    CompleteCommit,
    CompleteAbort,
    Dead,
    PrepareEpochFence,
}

impl TxnState {
    /// The name Kafka reports (DescribeTransactions, ListTransactions filters).
    pub fn name(self) -> &'static str {
        match self {
            TxnState::Empty => "Empty",
            TxnState::Ongoing => "Ongoing",
            TxnState::PrepareCommit => "PrepareCommit",
            TxnState::PrepareAbort => "PrepareAbort",
            TxnState::CompleteCommit => "CompleteCommit",
            TxnState::CompleteAbort => "CompleteAbort",
            TxnState::Dead => "Dead",
            TxnState::PrepareEpochFence => "PrepareEpochFence",
        }
    }
    fn status(self) -> i8 {
        match self {
            TxnState::Empty => status::EMPTY,
            TxnState::Ongoing => status::ONGOING,
            TxnState::PrepareCommit => status::PREPARE_COMMIT,
            TxnState::PrepareAbort => status::PREPARE_ABORT,
            TxnState::CompleteCommit => status::COMPLETE_COMMIT,
            TxnState::CompleteAbort => status::COMPLETE_ABORT,
            TxnState::Dead => status::DEAD,
            TxnState::PrepareEpochFence => status::PREPARE_EPOCH_FENCE,
        }
    }
    fn from_status(s: i8) -> Option<Self> {
        Some(match s {
            status::EMPTY => TxnState::Empty,
            status::ONGOING => TxnState::Ongoing,
            status::PREPARE_COMMIT => TxnState::PrepareCommit,
            status::PREPARE_ABORT => TxnState::PrepareAbort,
            status::COMPLETE_COMMIT => TxnState::CompleteCommit,
            status::COMPLETE_ABORT => TxnState::CompleteAbort,
            status::DEAD => TxnState::Dead,
            status::PREPARE_EPOCH_FENCE => TxnState::PrepareEpochFence,
            _ => return None,
        })
    }
}

/// `TransactionMetadata.isEpochExhausted`: the last epochs are kept for fencing.
pub fn epoch_exhausted(epoch: i16) -> bool {
    epoch >= i16::MAX - 1
}

/// One transactional id.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TxnMeta {
    pub producer_id: i64,
    pub previous_producer_id: i64,
    pub producer_epoch: i16,
    /// The epoch before the last bump, so a retried InitProducerId is recognised (KIP-360). Not
    /// written to the log (Kafka neither): −1 after a load.
    pub last_producer_epoch: i16,
    pub timeout_ms: i32,
    pub state: TxnState,
    /// (topic, partition) of the open transaction.
    pub partitions: BTreeSet<(String, i32)>,
    pub start_ms: i64,
    pub last_update_ms: i64,
    /// The producer id a transaction version 2 EndTxn moved to because the epochs of
    /// `producer_id` ran out: the markers still carry `producer_id`, the complete record makes
    /// this the producer id (epoch 0). −1 otherwise.
    pub next_producer_id: i64,
    /// The transaction version of the client (or the coordinator) behind the last transition
    /// (`clientTransactionVersion`; 0 for version 0 and 1, which behave alike here).
    pub client_tv: i16,
}

impl TxnMeta {
    fn to_value(&self) -> TransactionLogValue {
        let partitions = if self.state == TxnState::Empty {
            None
        } else {
            let mut by_topic: BTreeMap<&str, Vec<i32>> = BTreeMap::new();
            for (t, p) in &self.partitions {
                by_topic.entry(t).or_default().push(*p);
            }
            Some(
                by_topic
                    .into_iter()
                    .map(|(t, ps)| TxnTopicPartitions {
                        topic: t.to_string(),
                        partition_ids: ps,
                    })
                    .collect(),
            )
        };
        TransactionLogValue {
            producer_id: self.producer_id,
            previous_producer_id: self.previous_producer_id,
            next_producer_id: self.next_producer_id,
            producer_epoch: self.producer_epoch,
            transaction_timeout_ms: self.timeout_ms,
            transaction_status: self.state.status(),
            transaction_partitions: partitions,
            transaction_last_update_timestamp_ms: self.last_update_ms,
            transaction_start_timestamp_ms: self.start_ms,
            client_transaction_version: self.client_tv,
        }
    }

    fn from_value(v: &TransactionLogValue) -> Option<Self> {
        let state = TxnState::from_status(v.transaction_status)?;
        let partitions = v
            .transaction_partitions
            .iter()
            .flatten()
            .flat_map(|tp| tp.partition_ids.iter().map(|p| (tp.topic.clone(), *p)))
            .collect();
        Some(Self {
            producer_id: v.producer_id,
            previous_producer_id: v.previous_producer_id,
            producer_epoch: v.producer_epoch,
            last_producer_epoch: -1,
            timeout_ms: v.transaction_timeout_ms,
            state,
            partitions,
            start_ms: v.transaction_start_timestamp_ms,
            last_update_ms: v.transaction_last_update_timestamp_ms,
            next_producer_id: v.next_producer_id,
            client_tv: v.client_transaction_version,
        })
    }
}

/// Settings (`transaction.*` broker keys, Kafka's defaults).
#[derive(Debug, Clone, Copy)]
pub struct TxnConfig {
    /// `transaction.max.timeout.ms`: larger transaction timeouts are refused.
    pub max_timeout_ms: i32,
    /// `transactional.id.expiration.ms`: an idle id (no open transaction) is forgotten after it.
    pub id_expiration_ms: i64,
    /// `transaction.abort.timed.out.transaction.cleanup.interval.ms`.
    pub abort_check_interval_ms: i64,
    /// `transaction.remove.expired.transaction.cleanup.interval.ms`.
    pub expiration_check_interval_ms: i64,
}

impl Default for TxnConfig {
    fn default() -> Self {
        Self {
            max_timeout_ms: 900_000,
            id_expiration_ms: 604_800_000,
            abort_check_interval_ms: 10_000,
            expiration_check_interval_ms: 3_600_000,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TxnRequest {
    /// InitProducerId with a transactional id. `fresh_producer_id` is an unused id the shell
    /// reserved, taken when the id is new or its epochs are exhausted.
    InitProducerId {
        transactional_id: String,
        timeout_ms: i32,
        /// (producer id, epoch) the producer had (v3+, KIP-360), if any.
        expected: Option<(i64, i16)>,
        fresh_producer_id: i64,
    },
    /// AddPartitionsToTxn (and AddOffsetsToTxn, whose partition is the group's
    /// `__consumer_offsets` partition). `verify_only`: KIP-890 verification, nothing is added.
    AddPartitions {
        transactional_id: String,
        producer_id: i64,
        producer_epoch: i16,
        partitions: Vec<(String, i32)>,
        verify_only: bool,
        /// 2 when a broker adds the partitions for a transaction version 2 client (Produce v12+,
        /// TxnOffsetCommit v5+, AddPartitionsToTxn v4+), else 0 (Kafka's
        /// `transactionVersionForAddPartitionsToTxn`); stored with the transaction.
        client_tv: i16,
    },
    EndTxn {
        transactional_id: String,
        producer_id: i64,
        producer_epoch: i16,
        commit: bool,
        /// 2 for EndTxn v5+ (the client bumps its epoch with every transaction), else 0.
        client_tv: i16,
        /// An unused producer id the shell reserved for a version 2 EndTxn whose epoch is
        /// exhausted (the transaction ends on a new producer id); `None` otherwise.
        fresh_producer_id: Option<i64>,
    },
    Describe {
        transactional_id: String,
    },
    /// ListTransactions: empty filters match everything; `min_duration_ms` < 0 is no filter.
    List {
        states: Vec<String>,
        producer_ids: Vec<i64>,
        min_duration_ms: i64,
    },
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TxnResponse {
    InitProducerId {
        error: i16,
        producer_id: i64,
        producer_epoch: i16,
    },
    /// One code per requested partition, in request order.
    AddPartitions(Vec<i16>),
    /// The producer id and epoch to continue with: after a version 2 EndTxn the bumped epoch
    /// (or the new producer id), else the current ones; −1 on error.
    EndTxn {
        error: i16,
        producer_id: i64,
        producer_epoch: i16,
    },
    Describe(Result<DescribedTxn, i16>),
    List(Vec<ListedTxn>),
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DescribedTxn {
    pub state: &'static str,
    pub producer_id: i64,
    pub producer_epoch: i16,
    pub timeout_ms: i32,
    pub start_ms: i64,
    pub partitions: Vec<(String, i32)>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ListedTxn {
    pub transactional_id: String,
    pub producer_id: i64,
    pub state: &'static str,
}

/// Markers to write once the prepare record before them is durable: one per partition, with
/// the producer's id and epoch; then [`TxnCoordinator::markers_written`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MarkerJob {
    pub transactional_id: String,
    pub producer_id: i64,
    pub producer_epoch: i16,
    pub commit: bool,
    pub partitions: Vec<(String, i32)>,
}

/// An EndTxn's arguments past its transactional id.
#[derive(Debug, Clone, Copy)]
struct EndTxn {
    producer: (i64, i16),
    commit: bool,
    client_tv: i16,
    fresh_producer_id: Option<i64>,
}

/// The producer id and epoch a client continues with after ending a transaction into `m`: a
/// version 2 end that ran out of epochs continues on the next producer id, epoch 0 (the id the
/// complete record will hold; its first add waits for the markers).
fn continue_with(m: &TxnMeta) -> (i64, i16) {
    if m.next_producer_id >= 0 {
        (m.next_producer_id, 0)
    } else {
        (m.producer_id, m.producer_epoch)
    }
}

/// A `__transaction_state` record: the transactional id and its value (`None`: a tombstone,
/// the id expired).
pub type TxnRecord = (String, Option<TransactionLogValue>);

/// What one call produced: records to make durable, then replies and marker jobs that may
/// leave only once those records are.
#[derive(Debug, Default)]
pub struct TxnOutput {
    pub records: Vec<TxnRecord>,
    pub replies: Vec<(ReqId, TxnResponse)>,
    pub markers: Vec<MarkerJob>,
}

/// The coordinator of one `__transaction_state` partition.
#[derive(Debug, Default)]
pub struct TxnCoordinator {
    config: TxnConfig,
    /// The broker's finalized `transaction.version`: the protocol of the transitions the
    /// coordinator makes on its own (timeouts, fencing). 0 until the shell sets it.
    transaction_version: i16,
    txns: BTreeMap<String, TxnMeta>,
    next_abort_check: i64,
    next_expiration_check: i64,
    /// Requests that arrived while their id's markers were being written, with the time they
    /// give up (see [`WAIT_FOR_MARKERS_MS`]). Transient: not in the log.
    waiting: BTreeMap<String, Vec<(ReqId, TxnRequest, i64)>>,
}

/// How long an AddPartitionsToTxn / AddOffsetsToTxn / InitProducerId that arrives while its
/// transactional id's markers are being written waits for them before it is answered
/// CONCURRENT_TRANSACTIONS. Kafka answers CONCURRENT_TRANSACTIONS at once and the client backs
/// off (`retry.backoff.ms`, 100 ms by default) — with transactions v1 the next transaction's
/// first request nearly always arrives in that window, so every transaction paid the backoff.
/// Markers take a few fdatasyncs, so waiting for them answers the same request milliseconds
/// later instead; the client sees success where it would have retried to success.
pub const WAIT_FOR_MARKERS_MS: i64 = 2_000;

/// Requests one transactional id may have waiting; more are answered CONCURRENT_TRANSACTIONS.
pub const MAX_WAITING_PER_ID: usize = 8;

/// The CONCURRENT_TRANSACTIONS answer to `req` (a request that gave up waiting for markers).
fn concurrent(req: &TxnRequest) -> TxnResponse {
    match req {
        TxnRequest::AddPartitions { partitions, .. } => {
            TxnResponse::AddPartitions(vec![code::CONCURRENT_TRANSACTIONS; partitions.len()])
        }
        _ => init_error(code::CONCURRENT_TRANSACTIONS),
    }
}

fn init_error(error: i16) -> TxnResponse {
    TxnResponse::InitProducerId {
        error,
        producer_id: -1,
        producer_epoch: -1,
    }
}

impl TxnCoordinator {
    pub fn new(config: TxnConfig) -> Self {
        Self {
            config,
            ..Self::default()
        }
    }

    /// The broker's finalized `transaction.version` changed (UpdateFeatures), or is first
    /// known.
    pub fn set_transaction_version(&mut self, level: i16) {
        self.transaction_version = level;
    }

    pub fn get(&self, transactional_id: &str) -> Option<&TxnMeta> {
        self.txns.get(transactional_id)
    }

    pub fn len(&self) -> usize {
        self.txns.len()
    }

    pub fn is_empty(&self) -> bool {
        self.txns.is_empty()
    }

    /// Rebuild state from one record of the log (load, and `apply`).
    pub fn replay(&mut self, record: &TxnRecord) {
        match &record.1 {
            None => {
                self.txns.remove(&record.0);
            }
            Some(v) => match TxnMeta::from_value(v) {
                Some(m) if m.state == TxnState::Dead => {
                    self.txns.remove(&record.0);
                }
                Some(m) => {
                    let last = self
                        .txns
                        .get(&record.0)
                        .map_or(-1, |old| old.last_producer_epoch);
                    let mut m = m;
                    m.last_producer_epoch = last;
                    self.txns.insert(record.0.clone(), m);
                }
                // An unknown status (a newer Kafka's): skipped, as an unknown record is.
                None => {}
            },
        }
    }

    /// After a load: the transactions caught between their prepare record and their complete
    /// record get their markers (again); writing a marker twice is harmless. Kafka's
    /// `loadTransactionsForTxnTopicPartition` does the same.
    pub fn on_loaded(&mut self, now: i64) -> Vec<MarkerJob> {
        debug_assert!(
            self.waiting.is_empty(),
            "a loaded coordinator has no waiting requests"
        );
        self.next_abort_check = now + self.config.abort_check_interval_ms;
        self.next_expiration_check = now + self.config.expiration_check_interval_ms;
        for m in self.txns.values_mut() {
            m.last_producer_epoch = -1;
        }
        self.txns
            .iter()
            .filter_map(|(id, m)| {
                let commit = match m.state {
                    TxnState::PrepareCommit => true,
                    TxnState::PrepareAbort => false,
                    _ => return None,
                };
                Some(MarkerJob {
                    transactional_id: id.clone(),
                    producer_id: m.producer_id,
                    producer_epoch: m.producer_epoch,
                    commit,
                    partitions: m.partitions.iter().cloned().collect(),
                })
            })
            .collect()
    }

    /// Every id's current record: replaying them rebuilds exactly this state (compaction keeps
    /// the last record of each id; tests compare a replay against the live state).
    pub fn records(&self) -> Vec<TxnRecord> {
        self.txns
            .iter()
            .map(|(id, m)| (id.clone(), Some(m.to_value())))
            .collect()
    }

    fn write(&mut self, id: &str, mut m: TxnMeta, out: &mut TxnOutput) {
        // PreviousProducerId is the producer id this transition started from: the record's own
        // id, or the old one when the transition moved to a new id (a rotation, an overflowed
        // v2 complete). A new id starts from itself. Kafka's `prepareTransitionTo` builds every
        // `TxnTransitMetadata` with the current producer id as `prevProducerId`
        // (core/src/main/scala/kafka/coordinator/transaction/TransactionMetadata.scala), and
        // TxnLogDiffTest holds the written records to Kafka 4.4's.
        m.previous_producer_id = self
            .txns
            .get(id)
            .map_or(m.producer_id, |old| old.producer_id);
        out.records.push((id.to_string(), Some(m.to_value())));
        self.txns.insert(id.to_string(), m);
    }

    /// Handle one request. Its reply is in `out.replies` — now, or (a request waiting for its
    /// id's markers) from a later [`Self::markers_written`] or [`Self::tick`].
    pub fn handle(&mut self, rid: ReqId, req: TxnRequest, now: i64, out: &mut TxnOutput) {
        if let Some(resp) = self.try_handle(rid, req, now, out) {
            out.replies.push((rid, resp));
        }
    }

    /// The reply, or `None` when the request waits for its id's markers.
    fn try_handle(
        &mut self,
        rid: ReqId,
        req: TxnRequest,
        now: i64,
        out: &mut TxnOutput,
    ) -> Option<TxnResponse> {
        if let Some(id) = self.must_wait(&req) {
            return self.park(id, rid, req, now);
        }
        let resp = match req {
            TxnRequest::InitProducerId {
                transactional_id,
                timeout_ms,
                expected,
                fresh_producer_id,
            } => self.init_producer_id(
                &transactional_id,
                timeout_ms,
                expected,
                fresh_producer_id,
                now,
                out,
            ),
            TxnRequest::AddPartitions {
                transactional_id,
                producer_id,
                producer_epoch,
                partitions,
                verify_only,
                client_tv,
            } => self.add_partitions(
                &transactional_id,
                (producer_id, producer_epoch),
                partitions,
                verify_only,
                client_tv,
                now,
                out,
            ),
            TxnRequest::EndTxn {
                transactional_id,
                producer_id,
                producer_epoch,
                commit,
                client_tv,
                fresh_producer_id,
            } => {
                let end = EndTxn {
                    producer: (producer_id, producer_epoch),
                    commit,
                    client_tv,
                    fresh_producer_id,
                };
                match self.end_txn(&transactional_id, end, now, out) {
                    Ok((producer_id, producer_epoch)) => TxnResponse::EndTxn {
                        error: code::NONE,
                        producer_id,
                        producer_epoch,
                    },
                    Err(error) => TxnResponse::EndTxn {
                        error,
                        producer_id: -1,
                        producer_epoch: -1,
                    },
                }
            }
            TxnRequest::Describe { transactional_id } => {
                TxnResponse::Describe(self.describe(&transactional_id))
            }
            TxnRequest::List {
                states,
                producer_ids,
                min_duration_ms,
            } => TxnResponse::List(self.list(&states, &producer_ids, min_duration_ms, now)),
        };
        Some(resp)
    }

    /// The id whose markers `req` should wait for: an InitProducerId, or an AddPartitions
    /// (not verify-only) from the current producer, while the id is between its prepare and
    /// complete records. Anything else is answered at once, as Kafka answers it.
    fn must_wait(&self, req: &TxnRequest) -> Option<String> {
        let (id, producer) = match req {
            TxnRequest::InitProducerId {
                transactional_id, ..
            } => (transactional_id, None),
            TxnRequest::AddPartitions {
                transactional_id,
                producer_id,
                producer_epoch,
                verify_only: false,
                ..
            } => (transactional_id, Some((*producer_id, *producer_epoch))),
            _ => return None,
        };
        let m = self.txns.get(id)?;
        let preparing = matches!(m.state, TxnState::PrepareCommit | TxnState::PrepareAbort);
        // A version 2 producer continues with the bumped epoch, or epoch 0 of the next
        // producer id, as soon as its EndTxn is answered: its next transaction's first add
        // arrives while the markers are being written.
        let current = producer.is_none_or(|p| {
            p == (m.producer_id, m.producer_epoch)
                || (m.next_producer_id >= 0 && p == (m.next_producer_id, 0))
        });
        (preparing && current).then(|| id.clone())
    }

    fn park(&mut self, id: String, rid: ReqId, req: TxnRequest, now: i64) -> Option<TxnResponse> {
        let w = self.waiting.entry(id).or_default();
        if w.len() >= MAX_WAITING_PER_ID {
            return Some(concurrent(&req));
        }
        w.push((rid, req, now + WAIT_FOR_MARKERS_MS));
        None
    }

    /// Requests waiting for markers, over every id.
    pub fn waiting(&self) -> usize {
        self.waiting.values().map(Vec::len).sum()
    }

    /// `handleInitProducerId` / `prepareInitProducerIdTransit`.
    fn init_producer_id(
        &mut self,
        id: &str,
        timeout_ms: i32,
        expected: Option<(i64, i16)>,
        fresh_pid: i64,
        now: i64,
        out: &mut TxnOutput,
    ) -> TxnResponse {
        if id.is_empty() {
            return init_error(code::INVALID_REQUEST);
        }
        if timeout_ms <= 0 || timeout_ms > self.config.max_timeout_ms {
            return init_error(code::INVALID_TRANSACTION_TIMEOUT);
        }
        let m = match self.txns.get(id) {
            Some(m) => m.clone(),
            None => TxnMeta {
                producer_id: fresh_pid,
                previous_producer_id: -1,
                producer_epoch: -1,
                last_producer_epoch: -1,
                timeout_ms,
                state: TxnState::Empty,
                partitions: BTreeSet::new(),
                start_ms: -1,
                last_update_ms: now,
                next_producer_id: -1,
                client_tv: 0,
            },
        };
        if let Some((pid, epoch)) = expected {
            let valid = m.producer_epoch == -1
                || pid == m.producer_id
                || (pid == m.previous_producer_id && epoch_exhausted(epoch));
            if !valid {
                return init_error(code::PRODUCER_FENCED);
            }
        }
        match m.state {
            TxnState::PrepareCommit | TxnState::PrepareAbort => {
                init_error(code::CONCURRENT_TRANSACTIONS)
            }
            TxnState::Empty | TxnState::CompleteCommit | TxnState::CompleteAbort => {
                let mut next = m.clone();
                if epoch_exhausted(m.producer_epoch)
                    && expected.is_none_or(|(_, e)| e == m.producer_epoch)
                {
                    // `prepareProducerIdRotation`: a new id, epoch 0 (`write` records the old one
                    // as the previous producer id).
                    next.producer_id = fresh_pid;
                    next.producer_epoch = 0;
                    next.last_producer_epoch = if expected.is_some() {
                        m.producer_epoch
                    } else {
                        -1
                    };
                } else {
                    // `prepareIncrementProducerEpoch`.
                    let bumped = m.producer_epoch.wrapping_add(1);
                    let (epoch, last) = match expected {
                        None => (bumped, -1),
                        Some((_, e)) if m.producer_epoch == -1 || e == m.producer_epoch => {
                            (bumped, m.producer_epoch)
                        }
                        // A retry of a call that bumped the epoch: same answer, no bump.
                        Some((_, e)) if e == m.last_producer_epoch => {
                            (m.producer_epoch, m.last_producer_epoch)
                        }
                        Some(_) => return init_error(code::PRODUCER_FENCED),
                    };
                    next.producer_epoch = epoch;
                    next.last_producer_epoch = last;
                }
                next.timeout_ms = timeout_ms;
                next.state = TxnState::Empty;
                next.partitions.clear();
                next.start_ms = -1;
                next.last_update_ms = now;
                next.next_producer_id = -1;
                // The client version stays what the last transition recorded (0 for a new id):
                // Kafka 4.4 writes the Empty record of an InitProducerId that follows a v2
                // transaction with ClientTransactionVersion 2 (TxnLogDiffTest, the fenced id).
                let resp = TxnResponse::InitProducerId {
                    error: code::NONE,
                    producer_id: next.producer_id,
                    producer_epoch: next.producer_epoch,
                };
                self.write(id, next, out);
                resp
            }
            TxnState::Ongoing => {
                // Fence the current producer and abort its transaction; the client retries
                // (CONCURRENT_TRANSACTIONS) and then gets a second bump.
                self.fence_and_abort(id, now, out);
                init_error(code::CONCURRENT_TRANSACTIONS)
            }
            TxnState::Dead | TxnState::PrepareEpochFence => {
                // Never stored (Dead ids are removed on replay; the fence is not a stored
                // state here).
                init_error(code::CONCURRENT_TRANSACTIONS)
            }
        }
    }

    /// `prepareFenceProducerEpoch` then `endTransaction(ABORT, isFromClient = false)`: the
    /// epoch is bumped so the running producer is fenced, and the transaction aborted with the
    /// new epoch.
    fn fence_and_abort(&mut self, id: &str, now: i64, out: &mut TxnOutput) {
        let Some(m) = self.txns.get(id) else { return };
        debug_assert_eq!(m.state, TxnState::Ongoing);
        let mut next = m.clone();
        if next.producer_epoch < i16::MAX {
            next.producer_epoch += 1;
        }
        next.last_producer_epoch = -1;
        next.state = TxnState::PrepareAbort;
        next.last_update_ms = now;
        // Not the client's doing: the broker's protocol. Under version 2 the fencing bump is
        // the abort's bump (one, not two), so a stalled producer's EndTxn with the epoch before
        // it reads as a retry of an ended transaction (INVALID_TXN_STATE), as in Kafka.
        next.client_tv = self.transaction_version;
        next.next_producer_id = -1;
        out.markers.push(MarkerJob {
            transactional_id: id.to_string(),
            producer_id: next.producer_id,
            producer_epoch: next.producer_epoch,
            commit: false,
            partitions: next.partitions.iter().cloned().collect(),
        });
        self.write(id, next, out);
    }

    /// `handleAddPartitionsToTransaction` and `handleVerifyPartitionsInTransaction`.
    #[allow(clippy::too_many_arguments)]
    fn add_partitions(
        &mut self,
        id: &str,
        (pid, epoch): (i64, i16),
        partitions: Vec<(String, i32)>,
        verify_only: bool,
        client_tv: i16,
        now: i64,
        out: &mut TxnOutput,
    ) -> TxnResponse {
        let all = |c: i16| TxnResponse::AddPartitions(vec![c; partitions.len()]);
        if id.is_empty() {
            return all(code::INVALID_REQUEST);
        }
        let Some(m) = self.txns.get(id) else {
            return all(code::INVALID_PRODUCER_ID_MAPPING);
        };
        if m.producer_id != pid {
            return all(code::INVALID_PRODUCER_ID_MAPPING);
        }
        if m.producer_epoch != epoch {
            return all(code::PRODUCER_FENCED);
        }
        if matches!(m.state, TxnState::PrepareCommit | TxnState::PrepareAbort) {
            return all(code::CONCURRENT_TRANSACTIONS);
        }
        if verify_only {
            return TxnResponse::AddPartitions(
                partitions
                    .iter()
                    .map(|p| {
                        if m.partitions.contains(p) {
                            code::NONE
                        } else {
                            code::TRANSACTION_ABORTABLE
                        }
                    })
                    .collect(),
            );
        }
        if m.state == TxnState::Ongoing && partitions.iter().all(|p| m.partitions.contains(p)) {
            return all(code::NONE);
        }
        let mut next = m.clone();
        if matches!(
            m.state,
            TxnState::Empty | TxnState::CompleteCommit | TxnState::CompleteAbort
        ) {
            next.start_ms = now;
            next.partitions.clear();
        }
        next.state = TxnState::Ongoing;
        next.last_update_ms = now;
        next.client_tv = client_tv;
        let n = partitions.len();
        next.partitions.extend(partitions);
        self.write(id, next, out);
        TxnResponse::AddPartitions(vec![code::NONE; n])
    }

    /// `handleEndTransaction` / `endTransaction(isFromClient = true)`. Returns the producer id
    /// and epoch the client continues with.
    fn end_txn(
        &mut self,
        id: &str,
        req: EndTxn,
        now: i64,
        out: &mut TxnOutput,
    ) -> Result<(i64, i16), i16> {
        let (pid, epoch) = req.producer;
        if id.is_empty() {
            return Err(code::INVALID_REQUEST);
        }
        let m = self.txns.get(id).ok_or(code::INVALID_PRODUCER_ID_MAPPING)?;
        // Judged by the protocol of the state's last transition: after a version 2 end the
        // stored epoch is one past the client's, and a retry must be told apart from a zombie.
        let v2 = supports_epoch_bump(m.client_tv);
        // The client's EndTxn ended the transaction with a bump and this is its retry.
        let retry_on_bump = v2 && m.producer_epoch as i32 == epoch as i32 + 1;
        // ... with the bump onto a new producer id.
        let retry_on_overflow =
            v2 && m.previous_producer_id == pid && epoch == i16::MAX - 1 && m.producer_epoch == 0;
        let valid_epoch = if v2 {
            match m.state {
                TxnState::PrepareCommit | TxnState::PrepareAbort => retry_on_bump,
                TxnState::CompleteCommit | TxnState::CompleteAbort => {
                    retry_on_bump || retry_on_overflow
                }
                _ => epoch == m.producer_epoch,
            }
        } else {
            // Version 1: the client's epoch must be the current one.
            epoch == m.producer_epoch
        };
        if m.producer_id != pid && !retry_on_overflow {
            return Err(code::INVALID_PRODUCER_ID_MAPPING);
        }
        if !valid_epoch {
            return Err(code::PRODUCER_FENCED);
        }
        match (m.state, req.commit) {
            (TxnState::Ongoing, commit) => {
                let mut next = m.clone();
                next.state = if commit {
                    TxnState::PrepareCommit
                } else {
                    TxnState::PrepareAbort
                };
                next.last_update_ms = now;
                next.client_tv = req.client_tv;
                next.next_producer_id = -1;
                if supports_epoch_bump(req.client_tv) {
                    // `prepareAbortOrCommit`: the markers carry epoch + 1. An exhausted epoch
                    // still has its last value left for this bump; the producer moves to a new
                    // id once the markers are written (`prepareComplete`).
                    if epoch_exhausted(m.producer_epoch) {
                        next.next_producer_id =
                            req.fresh_producer_id.ok_or(code::UNKNOWN_SERVER_ERROR)?;
                    }
                    next.last_producer_epoch = m.producer_epoch;
                    next.producer_epoch = m.producer_epoch.saturating_add(1);
                }
                out.markers.push(MarkerJob {
                    transactional_id: id.to_string(),
                    producer_id: next.producer_id,
                    producer_epoch: next.producer_epoch,
                    commit,
                    partitions: next.partitions.iter().cloned().collect(),
                });
                let cont = continue_with(&next);
                self.write(id, next, out);
                Ok(cont)
            }
            // A retry of an EndTxn that already completed.
            (TxnState::CompleteCommit, true) | (TxnState::CompleteAbort, false) => {
                Ok((m.producer_id, m.producer_epoch))
            }
            // Still writing markers: the client retries.
            (TxnState::PrepareCommit, true) | (TxnState::PrepareAbort, false) => {
                Err(code::CONCURRENT_TRANSACTIONS)
            }
            _ => Err(code::INVALID_TXN_STATE),
        }
    }

    /// Every marker of a transaction's end is durable: complete it (`prepareComplete`). A job
    /// overtaken by another transition (a newer epoch, a reload) changes nothing.
    pub fn markers_written(&mut self, job: &MarkerJob, now: i64, out: &mut TxnOutput) {
        let Some(m) = self.txns.get(&job.transactional_id) else {
            return;
        };
        let expected = if job.commit {
            TxnState::PrepareCommit
        } else {
            TxnState::PrepareAbort
        };
        if m.state != expected
            || m.producer_id != job.producer_id
            || m.producer_epoch != job.producer_epoch
        {
            return;
        }
        let mut next = m.clone();
        next.state = if job.commit {
            TxnState::CompleteCommit
        } else {
            TxnState::CompleteAbort
        };
        next.last_producer_epoch = m.producer_epoch;
        next.partitions.clear();
        next.last_update_ms = now;
        if supports_epoch_bump(m.client_tv) && m.next_producer_id >= 0 {
            // `prepareComplete` after an epoch overflow: the new producer id takes over (`write`
            // records the old one as the previous producer id).
            next.producer_id = m.next_producer_id;
            next.producer_epoch = 0;
        }
        next.next_producer_id = -1;
        let id = job.transactional_id.clone();
        self.write(&id, next, out);
        // What waited for these markers runs now, in arrival order.
        for (rid, req, _) in self.waiting.remove(&id).unwrap_or_default() {
            self.handle(rid, req, now, out);
        }
    }

    fn describe(&self, id: &str) -> Result<DescribedTxn, i16> {
        if id.is_empty() {
            return Err(code::INVALID_REQUEST);
        }
        let m = self.txns.get(id).ok_or(code::TRANSACTIONAL_ID_NOT_FOUND)?;
        Ok(DescribedTxn {
            state: m.state.name(),
            producer_id: m.producer_id,
            producer_epoch: m.producer_epoch,
            timeout_ms: m.timeout_ms,
            start_ms: m.start_ms,
            partitions: m.partitions.iter().cloned().collect(),
        })
    }

    /// `TransactionStateManager.listTransactionStates`: the duration filter keeps transactions
    /// running at least that long (only open ones have a start).
    fn list(
        &self,
        states: &[String],
        producer_ids: &[i64],
        min_duration_ms: i64,
        now: i64,
    ) -> Vec<ListedTxn> {
        self.txns
            .iter()
            .filter(|(_, m)| states.is_empty() || states.iter().any(|s| s == m.state.name()))
            .filter(|(_, m)| producer_ids.is_empty() || producer_ids.contains(&m.producer_id))
            .filter(|(_, m)| {
                min_duration_ms < 0
                    || (m.state == TxnState::Ongoing && now - m.start_ms >= min_duration_ms)
            })
            .map(|(id, m)| ListedTxn {
                transactional_id: id.clone(),
                producer_id: m.producer_id,
                state: m.state.name(),
            })
            .collect()
    }

    /// The next time [`Self::tick`] has work.
    pub fn next_deadline(&self) -> i64 {
        let waiting = self
            .waiting
            .values()
            .flatten()
            .map(|(_, _, d)| *d)
            .min()
            .unwrap_or(i64::MAX);
        self.next_abort_check
            .min(self.next_expiration_check)
            .min(waiting)
    }

    /// Periodic work at Kafka's intervals: abort transactions open longer than their timeout
    /// (`abortTimedOutTransactions`: the producer is fenced with an epoch bump), and forget ids
    /// idle longer than `transactional.id.expiration.ms` (a tombstone;
    /// `removeExpiredTransactionalIds` writes one for Empty and Complete* ids).
    pub fn tick(&mut self, now: i64, out: &mut TxnOutput) {
        // Requests that waited for markers too long get Kafka's answer.
        for w in self.waiting.values_mut() {
            w.retain(|(rid, req, deadline)| {
                if *deadline > now {
                    return true;
                }
                out.replies.push((*rid, concurrent(req)));
                false
            });
        }
        self.waiting.retain(|_, w| !w.is_empty());
        if now >= self.next_abort_check {
            self.next_abort_check = now + self.config.abort_check_interval_ms;
            let expired: Vec<String> = self
                .txns
                .iter()
                .filter(|(_, m)| {
                    m.state == TxnState::Ongoing && m.start_ms + (m.timeout_ms as i64) < now
                })
                .map(|(id, _)| id.clone())
                .collect();
            for id in expired {
                self.fence_and_abort(&id, now, out);
            }
        }
        if now >= self.next_expiration_check {
            self.next_expiration_check = now + self.config.expiration_check_interval_ms;
            let idle: Vec<String> = self
                .txns
                .iter()
                .filter(|(_, m)| {
                    matches!(
                        m.state,
                        TxnState::Empty | TxnState::CompleteCommit | TxnState::CompleteAbort
                    ) && m.last_update_ms + self.config.id_expiration_ms <= now
                })
                .map(|(id, _)| id.clone())
                .collect();
            for id in idle {
                self.txns.remove(&id);
                out.records.push((id, None));
            }
        }
    }
}

#[cfg(test)]
mod tests;
