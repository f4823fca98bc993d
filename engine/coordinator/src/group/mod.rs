//! The group coordinator of one `__consumer_offsets` partition: a pure state machine.
//!
//! `Coordinator::handle(req_id, ctx, request, now, out)` applies one request and appends to `out`
//! the records that describe the change (Kafka's GroupMetadata and OffsetCommit records, byte
//! compatible) and the responses that became ready: the one for this request, or for requests
//! parked earlier (a JoinGroup waits for the join phase to end, a follower's SyncGroup waits for
//! the leader's). `tick(now, out)` fires expired deadlines (sessions, join and sync deadlines, the
//! initial rebalance delay, offset retention). `replay(record)` rebuilds state from records alone,
//! which is how a restart recovers; `replay_in_batch` also takes the record's batch attributes and
//! producer, for transactional offset commits and transaction markers (`txn`), whose writes
//! `Output::txn` marks.
//!
//! No I/O, no clock: `now` (milliseconds since the Unix epoch) is passed in, so tests drive time
//! with a fake clock and a simulator can run thousands of members deterministically. The runtime
//! makes the records durable before it releases the responses.
//!
//! Rules follow Kafka's `GroupMetadataManager` (GMM), `ClassicGroup` and `OffsetMetadataManager`
//! (reference §5.5); comments cite the rule they implement.

pub mod assignor;
pub mod classic;
pub mod consumer;
pub mod migration;
#[cfg(test)]
mod migration_tests;

#[cfg(test)]
mod consumer_tests;
pub mod offset_store;
pub mod offsets;
pub mod regex_cache;
#[cfg(test)]
mod replay_tests;
pub mod target;
#[cfg(test)]
mod tests;
pub mod txn;
#[cfg(test)]
mod txn_tests;

use crate::topics::TopicsSnapshot;
use classic::ClassicGroup;
use kafka_protocol::messages::*;
use kafka_protocol::ResponseError;
use offsets::OffsetStore;
use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use wire::records::{OffsetCommitValue, Record, RecordKey, RecordValue};

/// Identifies one in-flight request so a parked response can find its way back.
pub type ReqId = u64;

/// Kafka's `CLASSIC_GROUP_NEW_MEMBER_JOIN_TIMEOUT_MS`: how long a new member may take to finish
/// its first join before it is dropped.
pub const NEW_MEMBER_JOIN_TIMEOUT_MS: i64 = 300_000;

/// See [`GroupConfig::assignment_offload_min_work`]: an assignment this size takes ~0.1 ms
/// inline (docs/performance.md, "KIP-848 assignor").
pub const DEFAULT_ASSIGNMENT_OFFLOAD_MIN_WORK: usize = 50_000;

/// Settings the coordinator needs, taken from the broker config at start-up.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GroupConfig {
    pub min_session_timeout_ms: i32,
    pub max_session_timeout_ms: i32,
    pub initial_rebalance_delay_ms: i32,
    pub max_size: i32,
    pub offset_metadata_max_bytes: i32,
    pub offsets_retention_ms: i64,
    pub offsets_retention_check_interval_ms: i64,
    /// Records between snapshots of a partition (`offsets.snapshot.interval.records`).
    pub snapshot_interval_records: u64,
    /// How long a tombstone stays in a compacted `__consumer_offsets` log
    /// (`log.cleaner.delete.retention.ms`, Kafka's default for the offsets topic).
    pub delete_retention_ms: i64,
    pub consumer_session_timeout_ms: i32,
    pub consumer_heartbeat_interval_ms: i32,
    /// Ringleader's own `group.consumer.reconciliation.heartbeat.interval.ms`: the interval a
    /// KIP-848 member is given while it has a step of its reconciliation left (see
    /// `consumer::heartbeat_interval_for`); 0 turns it off. Never more than the group's own
    /// heartbeat interval.
    pub consumer_reconciliation_heartbeat_interval_ms: i32,
    /// Server assignor names, the first being the default (`group.consumer.assignors`).
    pub consumer_assignors: Vec<String>,
    pub consumer_assignment_interval_ms: i32,
    pub consumer_max_size: i32,
    /// `group.coordinator.rebalance.protocols` contains `consumer`.
    pub consumer_protocol_enabled: bool,
    /// `group.consumer.migration.policy`: whether live groups convert between the protocols.
    pub migration_policy: migration::MigrationPolicy,
    /// A consumer group's target assignment whose size (`AssignSpec::work`: members plus
    /// partitions) reaches this runs off the request path (see `target`); smaller ones run
    /// inline. Not a Kafka key: Kafka 4.4 has `group.consumer.assignor.offload.enable` (internal,
    /// not yet wired); this is the broker's own threshold, also set by the simulator.
    pub assignment_offload_min_work: usize,
}

/// Kafka's defaults (`GroupCoordinatorConfig`, `GroupConfig`), which are also the broker
/// config's defaults (`engine::config`; a test there checks the two agree).
impl Default for GroupConfig {
    fn default() -> Self {
        Self {
            min_session_timeout_ms: 6000,
            max_session_timeout_ms: 1_800_000,
            initial_rebalance_delay_ms: 3000,
            max_size: i32::MAX,
            offset_metadata_max_bytes: 4096,
            offsets_retention_ms: 10_080 * 60_000,
            offsets_retention_check_interval_ms: 600_000,
            snapshot_interval_records: 100_000,
            delete_retention_ms: 86_400_000,
            consumer_session_timeout_ms: 45_000,
            consumer_heartbeat_interval_ms: 5000,
            consumer_reconciliation_heartbeat_interval_ms: 100,
            consumer_assignors: vec!["uniform".to_string(), "range".to_string()],
            consumer_assignment_interval_ms: 1000,
            consumer_max_size: i32::MAX,
            consumer_protocol_enabled: true,
            migration_policy: migration::MigrationPolicy::Bidirectional,
            assignment_offload_min_work: DEFAULT_ASSIGNMENT_OFFLOAD_MIN_WORK,
        }
    }
}

/// One group's overrides of the broker's consumer-group settings: Kafka's group configs
/// (`GroupConfig`: `consumer.session.timeout.ms`, `consumer.heartbeat.interval.ms`,
/// `consumer.assignment.interval.ms`), set with IncrementalAlterConfigs on a GROUP resource and
/// applied from the group's next heartbeat. `None` is the broker's value. They are kept outside
/// `__consumer_offsets` (Kafka keeps them in its metadata log), so a group need not exist.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct GroupOverrides {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session_timeout_ms: Option<i32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub heartbeat_interval_ms: Option<i32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub assignment_interval_ms: Option<i32>,
}

/// Every group's overrides, by group id.
pub type GroupOverridesMap = BTreeMap<String, GroupOverrides>;

/// Who sent a request, as Kafka records it on the member.
#[derive(Debug, Clone, Default)]
pub struct RequestContext {
    pub client_id: String,
    pub client_host: String,
    pub api_version: i16,
    /// Topics that exist right now, for commit validation and subscription checks.
    pub topics: Arc<TopicsSnapshot>,
    /// Per-group config overrides right now.
    pub group_configs: Arc<GroupOverridesMap>,
    /// The topics the requester may Describe, when ACLs are on (`None`: every topic). A regex
    /// subscription resolves only to those, as Kafka 4.x's
    /// `GroupMetadataManager.refreshRegularExpressions` filters the matches with the authorizer
    /// and the request context of the heartbeat that resolves it.
    pub topic_filter: Option<TopicFilter>,
}

/// A pure predicate over topic names (the broker builds it from the ACL snapshot and the
/// caller's principal; no I/O).
#[derive(Clone)]
pub struct TopicFilter(pub Arc<dyn Fn(&str) -> bool + Send + Sync>);

impl TopicFilter {
    pub fn allows(&self, topic: &str) -> bool {
        (self.0)(topic)
    }
}

impl std::fmt::Debug for TopicFilter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("TopicFilter")
    }
}

/// One group's share of a (possibly multi-group) request.
#[derive(Debug, Clone)]
pub enum GroupRequest {
    Join(JoinGroupRequest),
    Sync(SyncGroupRequest),
    Heartbeat(HeartbeatRequest),
    Leave(LeaveGroupRequest),
    OffsetCommit(OffsetCommitRequest),
    /// OffsetFetch for one group; `topics: None` means every committed offset.
    /// `require_stable` (v7+): a partition with a pending transactional offset answers
    /// UNSTABLE_OFFSET_COMMIT instead of its committed offset.
    OffsetFetch {
        group: String,
        topics: Option<Vec<(String, Vec<i32>)>>,
        member_id: Option<String>,
        member_epoch: i32,
        require_stable: bool,
    },
    OffsetDelete(OffsetDeleteRequest),
    Describe {
        group: String,
    },
    ConsumerHeartbeat(ConsumerGroupHeartbeatRequest),
    ConsumerDescribe {
        group: String,
    },
    /// ListGroups over this partition, with the request's filters (lower-cased).
    List {
        states: Vec<String>,
        types: Vec<String>,
    },
    Delete {
        group: String,
    },
    /// TxnOffsetCommit for one group: the offsets stay pending (invisible to OffsetFetch) until
    /// the producer's transaction ends (see `txn`).
    /// The guard is the one [`GroupRequest::TxnGuard`] gave before the transaction coordinator
    /// verified the partition in the producer's transaction (see [`txn::TxnGuard`]).
    TxnOffsetCommit(TxnOffsetCommitRequest, txn::TxnGuard),
    /// Begin the verification of a TxnOffsetCommit of `producer_id`: answered at once with the
    /// guard its write must carry; writes nothing.
    TxnGuard {
        producer_id: i64,
    },
    /// A transaction's end reached this partition: make the producer's pending offsets
    /// visible (commit) or drop them (abort). Answered once durable.
    TxnMarker {
        producer_id: i64,
        producer_epoch: i16,
        commit: bool,
        coordinator_epoch: i32,
    },
}

/// The answer for one group (or one partition, for `List`).
#[derive(Debug, Clone, PartialEq)]
pub enum GroupResponse {
    Join(JoinGroupResponse),
    Sync(SyncGroupResponse),
    Heartbeat(HeartbeatResponse),
    Leave(LeaveGroupResponse),
    OffsetCommit(OffsetCommitResponse),
    OffsetFetch(FetchedOffsets),
    OffsetDelete(OffsetDeleteResponse),
    Describe(describe_groups_response::DescribedGroup),
    ConsumerHeartbeat(ConsumerGroupHeartbeatResponse),
    ConsumerDescribe(consumer_group_describe_response::DescribedGroup),
    List(Vec<list_groups_response::ListedGroup>),
    Delete(i16),
    TxnOffsetCommit(TxnOffsetCommitResponse),
    /// The guard, or the error that refused it.
    TxnGuard(Result<txn::TxnGuard, i16>),
    /// The marker's error code (0 once it is durable).
    TxnMarker(i16),
}

/// Offsets of one group as OffsetFetch reports them: (topic, partition) → (offset, leader epoch,
/// metadata, error code).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct FetchedOffsets {
    pub error_code: i16,
    pub partitions: Vec<(String, i32, i64, i32, String, i16)>,
}

/// The same response carrying `code` instead: what a request gets when the write of its records
/// failed (Kafka maps a storage error to NOT_COORDINATOR, so the client re-finds the
/// coordinator and retries).
pub fn failed_response(resp: &GroupResponse, code: i16) -> GroupResponse {
    match resp {
        GroupResponse::Join(r) => GroupResponse::Join(
            r.clone()
                .with_error_code(code)
                .with_generation_id(-1)
                .with_members(Vec::new()),
        ),
        GroupResponse::Sync(r) => GroupResponse::Sync(
            r.clone()
                .with_error_code(code)
                .with_assignment(Default::default()),
        ),
        GroupResponse::Heartbeat(r) => GroupResponse::Heartbeat(r.clone().with_error_code(code)),
        GroupResponse::Leave(r) => {
            let mut r = r.clone().with_error_code(code);
            for m in r.members.iter_mut() {
                m.error_code = code;
            }
            GroupResponse::Leave(r)
        }
        GroupResponse::OffsetCommit(r) => {
            let mut r = r.clone();
            for t in r.topics.iter_mut() {
                for p in t.partitions.iter_mut() {
                    p.error_code = code;
                }
            }
            GroupResponse::OffsetCommit(r)
        }
        GroupResponse::OffsetFetch(_) => GroupResponse::OffsetFetch(FetchedOffsets {
            error_code: code,
            partitions: Vec::new(),
        }),
        GroupResponse::OffsetDelete(r) => {
            GroupResponse::OffsetDelete(r.clone().with_error_code(code).with_topics(Vec::new()))
        }
        GroupResponse::Describe(r) => {
            GroupResponse::Describe(r.clone().with_error_code(code).with_members(Vec::new()))
        }
        GroupResponse::List(_) => GroupResponse::List(Vec::new()),
        GroupResponse::Delete(_) => GroupResponse::Delete(code),
        GroupResponse::TxnOffsetCommit(r) => {
            let mut r = r.clone();
            for t in r.topics.iter_mut() {
                for p in t.partitions.iter_mut() {
                    p.error_code = code;
                }
            }
            GroupResponse::TxnOffsetCommit(r)
        }
        GroupResponse::TxnMarker(_) => GroupResponse::TxnMarker(code),
        GroupResponse::TxnGuard(_) => GroupResponse::TxnGuard(Err(code)),
        GroupResponse::ConsumerHeartbeat(_) => GroupResponse::ConsumerHeartbeat(
            ConsumerGroupHeartbeatResponse::default().with_error_code(code),
        ),
        GroupResponse::ConsumerDescribe(r) => GroupResponse::ConsumerDescribe(
            r.clone().with_error_code(code).with_members(Vec::new()),
        ),
    }
}

/// What one call produced: records to make durable, then responses to release, and target
/// assignments to compute off the request path (the shell runs each with
/// [`target::AssignmentJob::run`] and hands the result back to [`Coordinator::assignment_done`]).
#[derive(Debug, Default)]
pub struct Output {
    pub records: Vec<Record>,
    /// `Some` when `records` are a producer's transactional offset commits, or (with no
    /// records) a transaction marker: the partition writes them as a batch of their own.
    pub txn: Option<txn::TxnWrite>,
    pub replies: Vec<(ReqId, GroupResponse)>,
    pub jobs: Vec<target::AssignmentJob>,
}

/// A deadline the coordinator wants to be woken for.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum TimerKey {
    /// A member's session (classic heartbeat) expiry.
    Heartbeat { group: String, member: String },
    /// A member that got MEMBER_ID_REQUIRED and has not rejoined yet.
    PendingMember { group: String, member: String },
    /// The end of a join phase (initial delay or rebalance timeout).
    Join { group: String },
    /// Members that have not sent SyncGroup by then are removed.
    Sync { group: String },
    /// Periodic offset expiry.
    Retention,
    /// A consumer-protocol member's session expiry.
    ConsumerSession { group: String, member: String },
    /// A consumer-protocol member that has not finished revoking by its rebalance timeout.
    ConsumerRevocation { group: String, member: String },
    /// A classic member of a consumer group told to rejoin that has not by its rebalance timeout.
    ConsumerJoin { group: String, member: String },
    /// A classic member of a consumer group that has not sent SyncGroup after its JoinGroup.
    ConsumerSync { group: String, member: String },
}

/// Deadlines ordered by time. Each owner remembers its own deadline, so rescheduling removes the
/// exact old entry (no stale wake-ups to filter). Both indexes share one allocation of each key
/// (a member's session timer is one per member, so two copies of its strings were a visible part
/// of a member's memory).
#[derive(Debug, Default, Clone)]
pub struct Timers {
    by_time: std::collections::BTreeSet<(i64, Arc<TimerKey>)>,
    by_key: HashMap<Arc<TimerKey>, i64>,
}

impl Timers {
    pub fn schedule(&mut self, key: TimerKey, deadline: i64) {
        if let Some((k, &old)) = self.by_key.get_key_value(&key) {
            if old == deadline {
                return;
            }
            let k = k.clone();
            self.by_time.remove(&(old, k.clone()));
            self.by_time.insert((deadline, k));
            *self.by_key.get_mut(&key).expect("present") = deadline;
            return;
        }
        let k = Arc::new(key);
        self.by_key.insert(k.clone(), deadline);
        self.by_time.insert((deadline, k));
    }
    pub fn cancel(&mut self, key: &TimerKey) {
        if let Some((k, old)) = self.by_key.remove_entry(key) {
            self.by_time.remove(&(old, k));
        }
    }
    pub fn deadline(&self, key: &TimerKey) -> Option<i64> {
        self.by_key.get(key).copied()
    }
    pub fn next(&self) -> Option<i64> {
        self.by_time.first().map(|(t, _)| *t)
    }
    /// Remove and return the earliest timer due at `now`.
    pub fn pop_due(&mut self, now: i64) -> Option<TimerKey> {
        let (t, _) = self.by_time.first()?;
        if *t > now {
            return None;
        }
        let (_, key) = self.by_time.pop_first()?;
        self.by_key.remove(&*key);
        Some(Arc::try_unwrap(key).unwrap_or_else(|k| (*k).clone()))
    }
    pub fn len(&self) -> usize {
        self.by_key.len()
    }
    pub fn is_empty(&self) -> bool {
        self.by_key.is_empty()
    }
}

/// Everything one `__consumer_offsets` partition knows.
#[derive(Debug, Clone)]
pub struct Coordinator {
    pub partition: i32,
    pub config: GroupConfig,
    pub groups: BTreeMap<String, ClassicGroup>,
    pub consumer_groups: BTreeMap<String, consumer::ConsumerGroup>,
    pub offsets: OffsetStore,
    /// Pending transactional offsets, per producer (see `txn`).
    pub txn: txn::TxnOffsets,
    pub timers: Timers,
    /// The topics seen with the latest request, for deadlines that need them (a delayed target).
    pub last_topics: Option<Arc<TopicsSnapshot>>,
    /// The per-group config overrides seen with the latest request.
    pub group_configs: Arc<GroupOverridesMap>,
    /// Completed classic join phases and consumer-group target assignments (a metric only).
    pub rebalances: u64,
    /// Where new classic member ids come from: `None` draws random UUIDs, as Kafka does; the
    /// simulator (`crate::sim`) sets a seeded sequence so that a seed replays exactly: ids are
    /// in responses, records and traces, and they order timers due in the same millisecond.
    pub member_ids: Option<SeededIds>,
    /// While loading (`replay_bytes`): an offset commit that found its group existing marks the
    /// group's slot in the offset store with this epoch. Every other replayed record may
    /// remove a group and bumps the epoch (so do `handle`, `tick` and `on_loaded`), so a mark
    /// equal to the epoch means the group still exists and the two ordered-map lookups of
    /// `replay_offset_commit` can be skipped — they were a quarter of replay's cost. Starts at
    /// 1: a new slot's mark is 0.
    load_epoch: u64,
    /// Subscription regexes compiled and resolved per topics snapshot (derived state, rebuilt
    /// on demand; not in records or snapshots).
    pub regexes: regex_cache::RegexCache,
    /// Consumer groups whose target assignment runs off the request path: the id of the job
    /// whose result they wait for (see `target`). Not durable: a reloaded coordinator has none,
    /// and its groups compute again at their next heartbeat.
    pub(crate) assigning: BTreeMap<String, u64>,
    pub(crate) next_job: u64,
}

/// Offsets without a group record belong to a standalone ("simple") group, which exists as an
/// empty classic group (`getOrMaybeCreateClassicGroup` on replay), created at its first commit.
fn ensure_group(
    groups: &mut BTreeMap<String, ClassicGroup>,
    consumer_groups: &BTreeMap<String, consumer::ConsumerGroup>,
    group: &str,
    commit_timestamp: i64,
) {
    if !groups.contains_key(group) && !consumer_groups.contains_key(group) {
        groups.insert(
            group.to_string(),
            ClassicGroup::empty(group, commit_timestamp),
        );
    }
}

/// A deterministic stream of version-4-shaped UUIDs for classic member ids. Give every
/// coordinator instance (every load of a partition) a fresh seed, so ids never repeat.
#[derive(Debug, Clone)]
pub struct SeededIds {
    seed: u64,
    next: u64,
}

impl SeededIds {
    pub fn new(seed: u64) -> Self {
        Self { seed, next: 0 }
    }

    pub fn next_uuid(&mut self) -> uuid::Uuid {
        // SplitMix64 over (seed, counter): distinct counters give unrelated ids.
        let mix = |mut z: u64| {
            z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
            z ^ (z >> 31)
        };
        self.next += 1;
        let a = mix(self.seed ^ self.next.wrapping_mul(0x9e37_79b9_7f4a_7c15));
        let b = mix(a ^ self.seed.rotate_left(32));
        let mut bytes = [0u8; 16];
        bytes[..8].copy_from_slice(&a.to_be_bytes());
        bytes[8..].copy_from_slice(&b.to_be_bytes());
        uuid::Builder::from_random_bytes(bytes).into_uuid()
    }
}

pub(crate) fn err(e: ResponseError) -> i16 {
    e.code()
}

impl Coordinator {
    pub fn new(partition: i32, config: GroupConfig) -> Self {
        Self {
            partition,
            config,
            groups: BTreeMap::new(),
            consumer_groups: BTreeMap::new(),
            last_topics: None,
            group_configs: Arc::default(),
            rebalances: 0,
            member_ids: None,
            offsets: OffsetStore::default(),
            txn: txn::TxnOffsets::default(),
            timers: Timers::default(),
            load_epoch: 1,
            regexes: regex_cache::RegexCache::default(),
            assigning: BTreeMap::new(),
            next_job: 1,
        }
    }

    /// A replayed record may remove a group: group marks taken before it no longer hold.
    pub(crate) fn bump_load_epoch(&mut self) {
        self.load_epoch += 1;
    }

    /// A target assignment this coordinator emitted in [`Output::jobs`] has run: write it, if
    /// the group still waits for it (see `target`).
    pub fn assignment_done(&mut self, done: target::AssignmentDone, now: i64, out: &mut Output) {
        target::apply(self, done, now, out);
    }

    /// Groups waiting for an offloaded assignment.
    pub fn assignments_running(&self) -> usize {
        self.assigning.len()
    }

    /// `consumer.session.timeout.ms` of `group`: its override, else the broker's
    /// (`GMM.consumerGroupSessionTimeoutMs`).
    pub fn consumer_session_timeout_ms(&self, group: &str) -> i32 {
        self.group_configs
            .get(group)
            .and_then(|o| o.session_timeout_ms)
            .unwrap_or(self.config.consumer_session_timeout_ms)
    }

    /// `consumer.heartbeat.interval.ms` of `group` (`GMM.consumerGroupHeartbeatIntervalMs`).
    pub fn consumer_heartbeat_interval_ms(&self, group: &str) -> i32 {
        self.group_configs
            .get(group)
            .and_then(|o| o.heartbeat_interval_ms)
            .unwrap_or(self.config.consumer_heartbeat_interval_ms)
    }

    /// `consumer.assignment.interval.ms` of `group` (`GMM.consumerGroupAssignmentIntervalMs`).
    pub fn consumer_assignment_interval_ms(&self, group: &str) -> i32 {
        self.group_configs
            .get(group)
            .and_then(|o| o.assignment_interval_ms)
            .unwrap_or(self.config.consumer_assignment_interval_ms)
    }

    /// The earliest deadline, so the runtime knows when to call `tick`.
    pub fn next_deadline(&self) -> Option<i64> {
        self.timers.next()
    }

    /// Make sure periodic offset expiry is scheduled (called once the partition is loaded).
    pub fn start(&mut self, now: i64) {
        if self.timers.deadline(&TimerKey::Retention).is_none() {
            self.timers.schedule(
                TimerKey::Retention,
                now + self.config.offsets_retention_check_interval_ms,
            );
        }
    }

    pub fn handle(
        &mut self,
        id: ReqId,
        ctx: &RequestContext,
        req: GroupRequest,
        now: i64,
        out: &mut Output,
    ) {
        self.load_epoch += 1;
        if self
            .last_topics
            .as_ref()
            .is_none_or(|t| !Arc::ptr_eq(t, &ctx.topics))
        {
            self.last_topics = Some(ctx.topics.clone());
        }
        if !Arc::ptr_eq(&self.group_configs, &ctx.group_configs) {
            self.group_configs = ctx.group_configs.clone();
        }
        match req {
            GroupRequest::ConsumerHeartbeat(r) => consumer::heartbeat(self, id, ctx, r, now, out),
            GroupRequest::ConsumerDescribe { group } => {
                let d = consumer::describe(self, &group, &ctx.topics);
                out.replies.push((id, GroupResponse::ConsumerDescribe(d)));
            }
            GroupRequest::Join(r) => classic::join(self, id, ctx, r, now, out),
            GroupRequest::Sync(r) => classic::sync(self, id, ctx, r, now, out),
            GroupRequest::Heartbeat(r) => {
                let resp = classic::heartbeat(self, ctx, r, now);
                out.replies.push((id, GroupResponse::Heartbeat(resp)));
            }
            GroupRequest::Leave(r) => classic::leave(self, id, ctx, r, now, out),
            GroupRequest::OffsetCommit(r) => {
                let resp = offsets::commit(self, ctx, r, now, out);
                out.replies.push((id, GroupResponse::OffsetCommit(resp)));
            }
            GroupRequest::OffsetFetch {
                group,
                topics,
                member_id,
                member_epoch,
                require_stable,
            } => {
                let resp = offsets::fetch(
                    self,
                    &group,
                    topics,
                    member_id.as_deref(),
                    member_epoch,
                    require_stable,
                );
                out.replies.push((id, GroupResponse::OffsetFetch(resp)));
            }
            GroupRequest::OffsetDelete(r) => {
                let resp = offsets::delete(self, ctx, r, out);
                out.replies.push((id, GroupResponse::OffsetDelete(resp)));
            }
            GroupRequest::Describe { group } => {
                let resp = classic::describe(self, &group, ctx.api_version);
                out.replies.push((id, GroupResponse::Describe(resp)));
            }
            GroupRequest::List { states, types } => {
                let resp = classic::list(self, &states, &types);
                out.replies.push((id, GroupResponse::List(resp)));
            }
            GroupRequest::Delete { group } => {
                let code = self.delete_group(&group, now, out);
                out.replies.push((id, GroupResponse::Delete(code)));
            }
            GroupRequest::TxnGuard { producer_id } => {
                let resp = self.txn.begin_guard(producer_id);
                out.replies.push((id, GroupResponse::TxnGuard(resp)));
            }
            GroupRequest::TxnOffsetCommit(r, guard) => {
                let resp = txn::commit(self, ctx, r, guard, now, out);
                out.replies.push((id, GroupResponse::TxnOffsetCommit(resp)));
            }
            GroupRequest::TxnMarker {
                producer_id,
                producer_epoch,
                commit,
                coordinator_epoch,
            } => {
                let code = txn::marker(
                    self,
                    producer_id,
                    producer_epoch,
                    commit,
                    coordinator_epoch,
                    out,
                );
                out.replies.push((id, GroupResponse::TxnMarker(code)));
            }
        }
    }

    /// DeleteGroups for one group: only an Empty group (or one with just offsets) can go; its
    /// offsets and its metadata are tombstoned (`GMM.deleteGroups`, `OffsetMetadataManager.deleteAllOffsets`).
    fn delete_group(&mut self, group: &str, _now: i64, out: &mut Output) -> i16 {
        if group.is_empty() {
            return err(ResponseError::InvalidGroupId);
        }
        if let Some(g) = self.consumer_groups.get(group) {
            if !g.members.is_empty() {
                return err(ResponseError::NonEmptyGroup);
            }
            let offsets: Vec<(String, i32)> = self.offset_keys_with_pending(group);
            for (topic, partition) in offsets {
                self.apply(
                    Record {
                        key: RecordKey::OffsetCommit {
                            group: group.to_string(),
                            topic,
                            partition,
                        },
                        value: None,
                    },
                    out,
                );
            }
            consumer::delete_empty(self, group, out);
            return 0;
        }
        match self.groups.get(group) {
            None => return err(ResponseError::GroupIdNotFound),
            Some(g) if g.state == classic::State::Dead => {
                return err(ResponseError::GroupIdNotFound)
            }
            Some(g) if g.state != classic::State::Empty => {
                return err(ResponseError::NonEmptyGroup)
            }
            Some(_) => {}
        }
        let mut records: Vec<Record> = self
            .offset_keys_with_pending(group)
            .into_iter()
            .map(|(topic, partition)| Record {
                key: RecordKey::OffsetCommit {
                    group: group.to_string(),
                    topic,
                    partition,
                },
                value: None,
            })
            .collect();
        records.push(Record {
            key: RecordKey::GroupMetadata {
                group: group.to_string(),
            },
            value: None,
        });
        for r in records {
            self.apply(r, out);
        }
        0
    }

    /// The partitions of `group` with a committed offset, then those with only pending
    /// transactional ones: what deleting all its offsets tombstones (`deleteAllOffsets`).
    fn offset_keys_with_pending(&self, group: &str) -> Vec<(String, i32)> {
        let mut keys = self.offsets.keys_of(group);
        if self.txn.has_open(group) {
            for (t, p) in self.txn.pending_of_group(group) {
                if self.offsets.get(group, &t, p).is_none() {
                    keys.push((t, p));
                }
            }
        }
        keys
    }

    /// Apply a record to memory and queue it for the log: every state change goes through here or
    /// through a record-producing transition, which is what keeps `replay` exact.
    pub(crate) fn apply(&mut self, record: Record, out: &mut Output) {
        self.replay(&record);
        out.records.push(record);
    }

    pub fn tick(&mut self, now: i64, out: &mut Output) {
        self.load_epoch += 1;
        while let Some(key) = self.timers.pop_due(now) {
            match key {
                TimerKey::Heartbeat { group, member } => {
                    classic::on_session_expired(self, &group, &member, now, out)
                }
                TimerKey::PendingMember { group, member } => {
                    classic::on_pending_member_expired(self, &group, &member, now, out)
                }
                TimerKey::Join { group } => classic::on_join_deadline(self, &group, now, out),
                TimerKey::Sync { group } => classic::on_sync_deadline(self, &group, now, out),
                TimerKey::ConsumerSession { group, member } => {
                    consumer::on_member_timeout(self, &group, &member, false, now, out)
                }
                TimerKey::ConsumerRevocation { group, member } => {
                    consumer::on_member_timeout(self, &group, &member, true, now, out)
                }
                TimerKey::ConsumerJoin { group, member }
                | TimerKey::ConsumerSync { group, member } => {
                    consumer::on_member_timeout(self, &group, &member, false, now, out)
                }
                TimerKey::Retention => {
                    offsets::expire(self, now, out);
                    self.timers.schedule(
                        TimerKey::Retention,
                        now + self.config.offsets_retention_check_interval_ms,
                    );
                }
            }
        }
    }

    /// After a load from the log: members' sessions start now, as Kafka's `onLoaded` reschedules
    /// every loaded member's heartbeat — classic and consumer-protocol members alike, plus the
    /// revocation deadline of a consumer member still revoking (without them, a member whose
    /// client died before a restart kept its partitions forever).
    pub fn on_loaded(&mut self, now: i64) {
        self.load_epoch += 1;
        let mut consumer_timers = Vec::new();
        for (g, grp) in &self.consumer_groups {
            let consumer_session = self.consumer_session_timeout_ms(g);
            for m in grp.members.values() {
                consumer_timers.push((
                    TimerKey::ConsumerSession {
                        group: g.clone(),
                        member: m.member_id.clone(),
                    },
                    now + m.session_timeout_ms(consumer_session),
                ));
                if m.state == consumer::MemberState::UnrevokedPartitions {
                    consumer_timers.push((
                        TimerKey::ConsumerRevocation {
                            group: g.clone(),
                            member: m.member_id.clone(),
                        },
                        now + m.rebalance_timeout_ms.max(0) as i64,
                    ));
                }
            }
        }
        for (key, deadline) in consumer_timers {
            self.timers.schedule(key, deadline);
        }
        let sessions: Vec<(String, String, i64)> = self
            .groups
            .iter()
            .flat_map(|(g, grp)| {
                grp.members
                    .values()
                    .map(move |m| (g.clone(), m.member_id.clone(), m.session_timeout_ms as i64))
            })
            .collect();
        for (g, m, t) in sessions {
            self.timers.schedule(
                TimerKey::Heartbeat {
                    group: g,
                    member: m,
                },
                now + t,
            );
        }
        self.start(now);
    }

    /// Replay one record given as its key and value bytes, as a partition load reads them.
    /// Returns false for a record that does not decode (a loader counts and skips it).
    ///
    /// Offset commits — nearly all of a log — take a fast path that gives exactly the state
    /// `replay(&Record::decode(key, value)?)` gives (a property test holds the two to that):
    /// the key's strings stay raw bytes and find their (group, topic) pair in the offset store
    /// by one hash (checked as UTF-8 only when the pair is new), the value is read by the
    /// specialised OffsetCommit decoder with its metadata borrowed, and the group-existence
    /// check is skipped while the group's mark says nothing could have removed it.
    pub fn replay_bytes(&mut self, key: &[u8], value: Option<&[u8]>) -> bool {
        if let Some((group, topic, partition)) = RecordKey::offset_commit_raw(key) {
            match value {
                None => {
                    if !self.txn.is_empty() {
                        if let (Some(g), Some(t)) =
                            (wire::records::utf8(group), wire::records::utf8(topic))
                        {
                            self.txn.on_tombstone(g, t, partition);
                        }
                    }
                    if let Some(pair) = self.offsets.find_pair(group, topic) {
                        self.offsets.remove_in(pair, partition);
                        return true;
                    }
                    // Nothing stored under it; the record still counts only if its key decodes.
                    return wire::records::utf8(group).is_some()
                        && wire::records::utf8(topic).is_some();
                }
                Some(bytes) => {
                    if let Some(v) = OffsetCommitValue::decode_ref(bytes) {
                        let pair = match self.offsets.find_pair(group, topic) {
                            Some(pair) => pair,
                            None => {
                                let (Some(g), Some(t)) =
                                    (wire::records::utf8(group), wire::records::utf8(topic))
                                else {
                                    return false;
                                };
                                self.offsets.find_or_insert_pair(g, t)
                            }
                        };
                        if self.offsets.group_mark(pair) != self.load_epoch {
                            let g = self.offsets.pair_group(pair);
                            ensure_group(
                                &mut self.groups,
                                &self.consumer_groups,
                                g,
                                v.commit_timestamp,
                            );
                            self.offsets.set_group_mark(pair, self.load_epoch);
                        }
                        self.offsets.put_ref(pair, partition, &v);
                        if !self.txn.is_empty() {
                            let g = self.offsets.pair_group(pair).to_string();
                            if let Some(t) = wire::records::utf8(topic) {
                                self.txn.on_committed(&g, t, partition, u64::MAX);
                            }
                        }
                        return true;
                    }
                    // The generic path below reports the value's error.
                }
            }
        }
        match Record::decode(key, value) {
            Ok(record) => {
                self.replay(&record);
                true
            }
            Err(_) => self.replay_snapshot_txn(key, value),
        }
    }

    /// Replay one record of a log batch with the batch's attributes and producer: plain
    /// batches go to [`Coordinator::replay_bytes`], a transactional batch's records become
    /// pending offsets of the producer, and a control batch's marker ends the producer's
    /// transaction (`CoordinatorPlayback.replay` / `replayEndTransactionMarker`). Returns false
    /// for a record that does not decode.
    pub fn replay_in_batch(
        &mut self,
        attributes: i16,
        producer_id: i64,
        producer_epoch: i16,
        key: Option<&[u8]>,
        value: Option<&[u8]>,
    ) -> bool {
        let Some(key) = key else { return false };
        if attributes & txn::ATTR_CONTROL != 0 {
            return match txn::decode_marker(key) {
                Some(commit) => {
                    self.replay_marker(producer_id, commit);
                    true
                }
                None => false,
            };
        }
        if attributes & txn::ATTR_TRANSACTIONAL != 0 && producer_id >= 0 {
            return self.replay_txn_record(producer_id, producer_epoch, key, value);
        }
        self.replay_bytes(key, value)
    }

    fn replay_offset_commit(
        &mut self,
        group: &str,
        topic: &str,
        partition: i32,
        v: OffsetCommitValue,
    ) {
        ensure_group(
            &mut self.groups,
            &self.consumer_groups,
            group,
            v.commit_timestamp,
        );
        self.offsets.put(group, topic, partition, v);
        if !self.txn.is_empty() {
            self.txn.on_committed(group, topic, partition, u64::MAX);
        }
    }

    /// Rebuild state from one record (restart recovery, and `apply`).
    pub fn replay(&mut self, record: &Record) {
        if !matches!(record.key, RecordKey::OffsetCommit { .. }) {
            // This record may remove a group: marks taken before it no longer hold.
            self.load_epoch += 1;
        }
        match (&record.key, &record.value) {
            (
                RecordKey::OffsetCommit {
                    group,
                    topic,
                    partition,
                },
                Some(RecordValue::OffsetCommit(v)),
            ) => self.replay_offset_commit(group, topic, *partition, v.clone()),
            (
                RecordKey::OffsetCommit {
                    group,
                    topic,
                    partition,
                },
                None,
            ) => {
                self.offsets.remove(group, topic, *partition);
                if !self.txn.is_empty() {
                    self.txn.on_tombstone(group, topic, *partition);
                }
            }
            (RecordKey::GroupMetadata { group }, Some(RecordValue::GroupMetadata(v))) => {
                classic::replay_metadata(self, group, v);
            }
            (RecordKey::GroupMetadata { group }, None) => {
                self.groups.remove(group);
            }
            (
                RecordKey::ConsumerGroupMetadata { .. }
                | RecordKey::ConsumerGroupMemberMetadata { .. }
                | RecordKey::ConsumerGroupTargetAssignmentMetadata { .. }
                | RecordKey::ConsumerGroupTargetAssignmentMember { .. }
                | RecordKey::ConsumerGroupCurrentMemberAssignment { .. }
                | RecordKey::ConsumerGroupRegularExpression { .. },
                _,
            ) => consumer::replay(self, &record.key, &record.value),
            // Other record types (share or streams groups, legacy offsets) are not ours to serve;
            // a partition log may legitimately hold them, so they are skipped, not rejected.
            _ => {}
        }
    }

    /// The records whose replay rebuilds exactly the durable state: the last GroupMetadata of
    /// each group and every committed offset. Valid when every record produced so far is durable
    /// (the log writer takes it when it has nothing pending).
    pub fn snapshot_records(&self) -> Vec<Record> {
        let mut out = Vec::new();
        for (id, g) in &self.groups {
            if let Some(v) = &g.last_record {
                out.push(Record {
                    key: RecordKey::GroupMetadata { group: id.clone() },
                    value: Some(RecordValue::GroupMetadata(v.clone())),
                });
            }
        }
        for g in self.consumer_groups.values() {
            consumer::snapshot_records(g, &mut out);
        }
        for (group, topic, partition, v) in self.offsets.all() {
            out.push(Record {
                key: RecordKey::OffsetCommit {
                    group,
                    topic,
                    partition,
                },
                value: Some(RecordValue::OffsetCommit(v)),
            });
        }
        out
    }

    /// The durable projection of the state: what a replay of the records must reproduce.
    /// Transient parts (parked requests, timers, pending members) are not in records, by design.
    pub fn durable_view(
        &self,
    ) -> (
        Vec<(String, wire::records::GroupMetadataValue)>,
        Vec<(String, String, i32, wire::records::OffsetCommitValue)>,
        Vec<consumer::ConsumerGroup>,
    ) {
        let groups = self
            .groups
            .iter()
            .filter(|(_, g)| g.state != classic::State::Dead)
            // A group that never reached a written state (only pending members so far, or just
            // created by a commit) has nothing of its own in the log yet.
            .filter(|(_, g)| {
                !(g.generation == 0 && g.members.is_empty() && g.protocol_type.is_none())
            })
            .map(|(id, g)| (id.clone(), g.to_record_value()))
            .collect();
        (
            groups,
            self.offsets.all(),
            self.consumer_groups.values().cloned().collect(),
        )
    }
}
