//! KIP-848 consumer groups: ConsumerGroupHeartbeat, server-side target assignment and
//! reconciliation (reference §5.6; `GroupMetadataManager.consumerGroupHeartbeat`,
//! `modern/consumer/CurrentAssignmentBuilder.java`, `ConsumerGroup.java`).
//!
//! Every change is made by emitting a record and replaying it (`Coordinator::apply`), so the
//! in-memory group is always exactly what the records say: replay rebuilds it, and a snapshot
//! can be taken from it at any time. Records follow Kafka's order: member metadata (5) [+ regex
//! (16)] → group epoch (3) → changed target members (7) → target metadata (6) → current member
//! assignment (8); a member leaves with tombstones 8, 7, 5 and a new group epoch.

use super::assignor::{Assignment, MemberAssignment, PackedAssignment};
use super::{err, Coordinator, GroupResponse, Output, ReqId, RequestContext, TimerKey};
use crate::topics::TopicsSnapshot;
use kafka_protocol::messages::consumer_group_describe_response as cgd;
use kafka_protocol::messages::consumer_group_heartbeat_response as cgh;
use kafka_protocol::messages::leave_group_response::MemberResponse;
use kafka_protocol::messages::*;
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::ResponseError;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use uuid::Uuid;
use wire::records::{
    ClassicMemberMetadata, ConsumerGroupCurrentMemberAssignmentValue,
    ConsumerGroupMemberMetadataValue, ConsumerGroupMetadataValue,
    ConsumerGroupRegularExpressionValue, ConsumerGroupTargetAssignmentMemberValue,
    ConsumerGroupTargetAssignmentMetadataValue, CurrentTopicPartitions, Record, RecordKey,
    RecordValue, TargetTopicPartitions,
};

/// Member epoch sentinels (ConsumerGroupHeartbeatRequest.json).
pub const LEAVE_EPOCH: i32 = -1;
pub const STATIC_LEAVE_EPOCH: i32 = -2;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MemberState {
    Stable = 0,
    UnrevokedPartitions = 1,
    UnreleasedPartitions = 2,
}

impl MemberState {
    fn from_i8(v: i8) -> Self {
        match v {
            1 => MemberState::UnrevokedPartitions,
            2 => MemberState::UnreleasedPartitions,
            _ => MemberState::Stable,
        }
    }
}

#[derive(Debug, Clone)]
pub struct ConsumerMember {
    pub member_id: String,
    pub instance_id: Option<String>,
    pub rack_id: Option<String>,
    /// Client id, host and subscription are shared (`Arc`) with other members of the group
    /// that have the same value, which in a typical group is all of them.
    pub client_id: Arc<str>,
    pub client_host: Arc<str>,
    /// Sorted.
    pub subscribed_topic_names: Arc<[String]>,
    pub subscribed_topic_regex: Option<String>,
    pub rebalance_timeout_ms: i32,
    pub server_assignor: Option<String>,
    pub member_epoch: i32,
    pub previous_member_epoch: i32,
    pub state: MemberState,
    pub assigned: MemberAssignment,
    pub pending_revocation: MemberAssignment,
    /// The epoch at which each partition of `assigned` and `pending_revocation` was given to
    /// the member, sorted by (topic, partition): a commit with an older member epoch is accepted
    /// for a partition it already held then (Kafka 4.3+, the `AssignmentEpochs` tagged field of
    /// the current-assignment record; `ConsumerGroup.createAssignmentEpochValidator`).
    pub assignment_epochs: Vec<(Uuid, i32, i32)>,
    /// What the member last reported owning; its assignment is sent until the two agree. Not
    /// durable (after a restart every member is sent its assignment again, which clients
    /// accept), so it takes no part in comparisons of members.
    pub sent: Option<PackedAssignment>,
    /// Set for a member that uses the classic protocol (JoinGroup/SyncGroup/Heartbeat) inside
    /// this consumer group: its session timeout and JoinGroup protocols, as the member metadata
    /// record's `ClassicMemberMetadata` carries them (`ConsumerGroupMember.classicMemberMetadata`).
    pub classic: Option<Box<ClassicMemberMetadata>>,
}

/// Every field but `sent` (not durable state): a replayed member equals the live one.
impl PartialEq for ConsumerMember {
    fn eq(&self, o: &Self) -> bool {
        let Self {
            member_id,
            instance_id,
            rack_id,
            client_id,
            client_host,
            subscribed_topic_names,
            subscribed_topic_regex,
            rebalance_timeout_ms,
            server_assignor,
            member_epoch,
            previous_member_epoch,
            state,
            assigned,
            pending_revocation,
            assignment_epochs,
            sent: _,
            classic,
        } = self;
        *member_id == o.member_id
            && *instance_id == o.instance_id
            && *rack_id == o.rack_id
            && *client_id == o.client_id
            && *client_host == o.client_host
            && *subscribed_topic_names == o.subscribed_topic_names
            && *subscribed_topic_regex == o.subscribed_topic_regex
            && *rebalance_timeout_ms == o.rebalance_timeout_ms
            && *server_assignor == o.server_assignor
            && *member_epoch == o.member_epoch
            && *previous_member_epoch == o.previous_member_epoch
            && *state == o.state
            && *assigned == o.assigned
            && *pending_revocation == o.pending_revocation
            && *assignment_epochs == o.assignment_epochs
            && *classic == o.classic
    }
}

impl ConsumerMember {
    pub(super) fn new(member_id: &str) -> Self {
        Self {
            member_id: member_id.into(),
            instance_id: None,
            rack_id: None,
            client_id: Arc::from(""),
            client_host: Arc::from(""),
            subscribed_topic_names: Arc::from([]),
            subscribed_topic_regex: None,
            rebalance_timeout_ms: -1,
            server_assignor: None,
            member_epoch: 0,
            previous_member_epoch: -1,
            state: MemberState::Stable,
            assigned: MemberAssignment::new(),
            pending_revocation: MemberAssignment::new(),
            assignment_epochs: Vec::new(),
            sent: None,
            classic: None,
        }
    }

    /// Whether the member speaks the classic protocol (`ConsumerGroupMember.useClassicProtocol`).
    pub fn uses_classic(&self) -> bool {
        self.classic.is_some()
    }

    /// The session timeout that applies to this member: its JoinGroup's for a classic member,
    /// the group's otherwise.
    pub fn session_timeout_ms(&self, consumer_session_timeout_ms: i32) -> i64 {
        self.classic
            .as_ref()
            .map_or(consumer_session_timeout_ms, |c| c.session_timeout_ms) as i64
    }

    pub(super) fn metadata_value(&self) -> ConsumerGroupMemberMetadataValue {
        ConsumerGroupMemberMetadataValue {
            instance_id: self.instance_id.clone(),
            rack_id: self.rack_id.clone(),
            client_id: self.client_id.to_string(),
            client_host: self.client_host.to_string(),
            subscribed_topic_names: self.subscribed_topic_names.to_vec(),
            // No regex is written as "", as Kafka's member builder defaults it.
            subscribed_topic_regex: Some(self.subscribed_topic_regex.clone().unwrap_or_default()),
            rebalance_timeout_ms: self.rebalance_timeout_ms,
            server_assignor: self.server_assignor.clone(),
            classic_member_metadata: self.classic.as_deref().cloned(),
        }
    }
    pub(super) fn assignment_value(&self) -> ConsumerGroupCurrentMemberAssignmentValue {
        ConsumerGroupCurrentMemberAssignmentValue {
            member_epoch: self.member_epoch,
            previous_member_epoch: self.previous_member_epoch,
            state: self.state as i8,
            assigned_partitions: to_current(&self.assigned, &self.assignment_epochs),
            partitions_pending_revocation: to_current(
                &self.pending_revocation,
                &self.assignment_epochs,
            ),
        }
    }

    /// The epoch at which the member was given `partition` of `topic`, if it holds it (assigned
    /// or pending revocation).
    pub fn assignment_epoch(&self, topic: &Uuid, partition: i32) -> Option<i32> {
        self.assignment_epochs
            .binary_search_by(|(t, p, _)| (t, *p).cmp(&(topic, partition)))
            .ok()
            .map(|i| self.assignment_epochs[i].2)
    }

    /// Re-derive `assignment_epochs` after `assigned` / `pending_revocation` changed: a partition
    /// it held before keeps its epoch (`was`), a new one gets `new_epoch`
    /// (`CurrentAssignmentBuilder.computeNextAssignment` stamps the target epoch).
    pub(super) fn restamp(&mut self, was: &ConsumerMember, new_epoch: i32) {
        let mut epochs = Vec::new();
        for a in [&self.assigned, &self.pending_revocation] {
            for (t, ps) in a.iter() {
                for p in ps {
                    let e = was.assignment_epoch(t, *p).unwrap_or(new_epoch);
                    epochs.push((*t, *p, e));
                }
            }
        }
        epochs.sort_unstable();
        epochs.dedup_by(|a, b| (a.0, a.1) == (b.0, b.1));
        epochs.shrink_to_fit();
        self.assignment_epochs = epochs;
    }
}

fn to_current(a: &MemberAssignment, epochs: &[(Uuid, i32, i32)]) -> Vec<CurrentTopicPartitions> {
    let epoch_of = |t: &Uuid, p: i32| {
        epochs
            .binary_search_by(|(et, ep, _)| (et, *ep).cmp(&(t, p)))
            .map(|i| epochs[i].2)
            .unwrap_or(0)
    };
    a.iter()
        .map(|(t, ps)| CurrentTopicPartitions {
            topic_id: *t,
            partitions: ps.iter().copied().collect(),
            assignment_epochs: Some(ps.iter().map(|p| epoch_of(t, *p)).collect()),
        })
        .collect()
}

pub(super) fn from_current(v: &[CurrentTopicPartitions]) -> MemberAssignment {
    v.iter()
        .map(|t| (t.topic_id, t.partitions.iter().copied().collect()))
        .filter(|(_, p): &(Uuid, BTreeSet<i32>)| !p.is_empty())
        .collect::<Assignment>()
        .into()
}

/// The assignment epochs a current-assignment record carries. A record without them (written
/// before Kafka 4.3, or by an older Ringleader), or with a list of the wrong length, gives every
/// partition the member's epoch, never below 0 (`Utils.assignmentFromTopicPartitions`).
fn epochs_from_current(v: &ConsumerGroupCurrentMemberAssignmentValue) -> Vec<(Uuid, i32, i32)> {
    let fallback = v.member_epoch.max(0);
    let mut out = Vec::new();
    for t in v
        .assigned_partitions
        .iter()
        .chain(v.partitions_pending_revocation.iter())
    {
        let given = t
            .assignment_epochs
            .as_ref()
            .filter(|e| e.len() == t.partitions.len());
        for (i, p) in t.partitions.iter().enumerate() {
            let e = given.map_or(fallback, |e| e[i]);
            out.push((t.topic_id, *p, e));
        }
    }
    out.sort_unstable();
    out.dedup_by(|a, b| (a.0, a.1) == (b.0, b.1));
    out.shrink_to_fit();
    out
}

#[derive(Debug, Clone, PartialEq, Default)]
pub struct ConsumerGroup {
    pub group_id: String,
    pub group_epoch: i32,
    pub metadata_hash: i64,
    pub assignment_epoch: i32,
    pub assignment_timestamp: i64,
    pub members: BTreeMap<String, ConsumerMember>,
    /// Target assignment per member, packed (read at reconciliation and on a new target only).
    pub target: BTreeMap<String, PackedAssignment>,
    /// Resolved regular expressions: regex → matching topic names.
    pub regexes: BTreeMap<String, Vec<String>>,
    /// The subscribed topics' metadata hash as last computed, and the topics it was computed
    /// against (see [`HashMemo`]).
    pub(super) hash_memo: HashMemo,
}

/// What [`metadata_hash`] gave for the group's subscribed topics at one topics snapshot
/// ([`TopicsSnapshot::id`]). Every heartbeat checks whether the subscribed topics changed, and
/// walking every member for their names made a KIP-848 heartbeat O(members): 1,000-member
/// groups spent more on it than on everything else a heartbeat does. The set of names changes
/// only when a member's subscription record (type 5) or a resolved regex (type 16) is applied,
/// and those clear this, so a heartbeat that changes neither reuses the hash (Kafka keeps a
/// running count of subscribed names instead, `ModernGroup.subscribedTopicNames`).
///
/// Derived, not state: a replayed group equals the live one whatever either has memoised.
#[derive(Debug, Clone, Default)]
pub(super) struct HashMemo(pub(super) Option<(u64, i64)>);

impl PartialEq for HashMemo {
    fn eq(&self, _: &Self) -> bool {
        true
    }
}

impl ConsumerGroup {
    /// Kafka's consumer-group states (`ConsumerGroup.ConsumerGroupState`).
    pub fn state_name(&self) -> &'static str {
        if self.members.is_empty() {
            "Empty"
        } else if self.group_epoch > self.assignment_epoch {
            "Assigning"
        } else if self
            .members
            .values()
            .any(|m| m.member_epoch != self.assignment_epoch || m.state != MemberState::Stable)
        {
            "Reconciling"
        } else {
            "Stable"
        }
    }

    /// The partitions of `wanted` that some member other than `except` still holds (assigned
    /// or being revoked). Only `wanted`'s topics are looked at: collecting every partition of a
    /// 10,000-member group into a set cost milliseconds per reconciled member.
    pub(super) fn owned_by_others(
        &self,
        except: &str,
        wanted: &Assignment,
    ) -> BTreeSet<(Uuid, i32)> {
        let mut s = BTreeSet::new();
        if wanted.is_empty() {
            return s;
        }
        for (id, m) in &self.members {
            if id == except {
                continue;
            }
            for a in [&m.assigned, &m.pending_revocation] {
                for (t, ps) in a {
                    if let Some(w) = wanted.get(t) {
                        s.extend(ps.iter().filter(|p| w.contains(p)).map(|p| (*t, *p)));
                    }
                }
            }
        }
        s
    }

    /// Topic names the whole group subscribes to (names and resolved regexes).
    pub(super) fn subscribed_names(&self) -> BTreeSet<&str> {
        let mut s = BTreeSet::new();
        let mut last: Option<&Arc<[String]>> = None;
        for m in self.members.values() {
            // Members usually share one subscription list: add each distinct list once.
            if last.is_none_or(|l| !Arc::ptr_eq(l, &m.subscribed_topic_names)) {
                s.extend(m.subscribed_topic_names.iter().map(|n| n.as_str()));
                last = Some(&m.subscribed_topic_names);
            }
            if let Some(r) = &m.subscribed_topic_regex {
                s.extend(
                    self.regexes
                        .get(r)
                        .into_iter()
                        .flatten()
                        .map(|n| n.as_str()),
                );
            }
        }
        s
    }

    pub fn subscribed_topics(&self) -> BTreeSet<String> {
        self.subscribed_names()
            .into_iter()
            .map(str::to_string)
            .collect()
    }
}

/// A stable hash of the subscribed topics' ids and sizes: a change (topic created, deleted or
/// grown) bumps the group epoch and so produces a new target (KIP-1101 keeps such a hash in the
/// group epoch record). FNV-1a, deterministic across restarts.
/// The group's metadata hash, as Kafka computes it (KIP-1101, `ModernGroup.computeMetadataHash`):
/// XXH3-64 over the XXH3-64 hashes of the subscribed topics that exist, in topic-name order, each
/// written as a little-endian long; 0 when there is none. Kafka's hash4j streams write every
/// number little-endian and a string as its UTF-16 code units then its length, so the records
/// carry the value the reference broker would write for the same topics.
pub(super) fn metadata_hash(names: &BTreeSet<&str>, topics: &TopicsSnapshot) -> i64 {
    let mut buf = Vec::new();
    for n in names {
        if let Some(t) = topics.get(n) {
            buf.extend_from_slice(&topic_hash(t.id, n, t.partitions).to_le_bytes());
        }
    }
    if buf.is_empty() {
        return 0;
    }
    xxhash_rust::xxh3::xxh3_64(&buf) as i64
}

/// `Utils.computeTopicHash`: magic byte 0, the id's two halves, the name, the partition count,
/// then each partition's index and its replicas' racks (none on this rackless single broker).
fn topic_hash(id: Uuid, name: &str, partitions: i32) -> u64 {
    let mut buf = Vec::with_capacity(1 + 16 + 2 * name.len() + 8 + 4 * partitions.max(0) as usize);
    buf.push(0u8);
    let (msb, lsb) = id.as_u64_pair();
    buf.extend_from_slice(&msb.to_le_bytes());
    buf.extend_from_slice(&lsb.to_le_bytes());
    let mut units = 0i32;
    for u in name.encode_utf16() {
        buf.extend_from_slice(&u.to_le_bytes());
        units += 1;
    }
    buf.extend_from_slice(&units.to_le_bytes());
    buf.extend_from_slice(&partitions.to_le_bytes());
    for i in 0..partitions {
        buf.extend_from_slice(&i.to_le_bytes());
    }
    xxhash_rust::xxh3::xxh3_64(&buf)
}

/// An assignment as the heartbeat response carries it.
fn response_assignment(a: &MemberAssignment) -> cgh::Assignment {
    cgh::Assignment::default().with_topic_partitions(
        a.iter()
            .map(|(t, ps)| {
                cgh::TopicPartitions::default()
                    .with_topic_id(*t)
                    .with_partitions(ps.iter().copied().collect())
            })
            .collect(),
    )
}

/// An assignment as a target-assignment record (type 7) stores it.
pub(super) fn target_value(a: &Assignment) -> ConsumerGroupTargetAssignmentMemberValue {
    ConsumerGroupTargetAssignmentMemberValue {
        topic_partitions: a
            .iter()
            .map(|(t, ps)| TargetTopicPartitions {
                topic_id: *t,
                partitions: ps.iter().copied().collect(),
            })
            .collect(),
    }
}

/// The same for a stored (packed) target.
pub(super) fn packed_target_value(
    a: &PackedAssignment,
) -> ConsumerGroupTargetAssignmentMemberValue {
    ConsumerGroupTargetAssignmentMemberValue {
        topic_partitions: a
            .iter()
            .map(|(t, ps)| TargetTopicPartitions {
                topic_id: t,
                partitions: ps.to_vec(),
            })
            .collect(),
    }
}

/// The packed target a target record stores (topics by id, partitions ascending, empty topics
/// dropped): what replaying it keeps.
pub(super) fn packed_from_value(v: &ConsumerGroupTargetAssignmentMemberValue) -> PackedAssignment {
    PackedAssignment::from_runs(
        v.topic_partitions
            .iter()
            .map(|t| (t.topic_id, t.partitions.as_slice())),
    )
}

/// `new` as an `Arc`, sharing the first of `candidates` that holds the same value.
pub(super) fn shared<'a, T: ?Sized + PartialEq + 'a>(
    new: &T,
    candidates: impl IntoIterator<Item = &'a Arc<T>>,
    make: impl FnOnce() -> Arc<T>,
) -> Arc<T> {
    candidates
        .into_iter()
        .find(|c| ***c == *new)
        .cloned()
        .unwrap_or_else(make)
}

pub(super) fn s(v: &str) -> StrBytes {
    StrBytes::from_string(v.to_string())
}

fn error(code: i16, msg: Option<String>) -> ConsumerGroupHeartbeatResponse {
    ConsumerGroupHeartbeatResponse::default()
        .with_error_code(code)
        .with_error_message(msg.map(|m| s(&m)))
}

fn owned_of(r: &ConsumerGroupHeartbeatRequest) -> Option<Assignment> {
    r.topic_partitions.as_ref().map(|tps| {
        tps.iter()
            .map(|t| {
                (
                    t.topic_id,
                    t.partitions.iter().copied().collect::<BTreeSet<i32>>(),
                )
            })
            .filter(|(_, p)| !p.is_empty())
            .collect()
    })
}

fn subset(a: &Assignment, b: &MemberAssignment) -> bool {
    a.iter()
        .all(|(t, ps)| b.get(t).is_some_and(|bs| ps.is_subset(bs)))
}

fn intersects(a: &Assignment, b: &MemberAssignment) -> bool {
    a.iter()
        .any(|(t, ps)| b.get(t).is_some_and(|bs| !ps.is_disjoint(bs)))
}

/// `GroupCoordinatorService.throwIfConsumerGroupHeartbeatRequestIsInvalid`.
fn validate(
    r: &ConsumerGroupHeartbeatRequest,
    v: i16,
    c: &Coordinator,
) -> Result<(), (i16, String)> {
    // `GroupCoordinatorService.throwIfConsumerGroupHeartbeatRequestIsInvalid`, in its order:
    // every failure here is INVALID_REQUEST (an empty group id too, not INVALID_GROUP_ID).
    let invalid = |m: &str| Err((err(ResponseError::InvalidRequest), m.to_string()));
    if (v >= 1 || r.member_epoch > 0 || r.member_epoch == LEAVE_EPOCH) && r.member_id.is_empty() {
        return invalid("MemberId can't be empty.");
    }
    if r.group_id.0.is_empty() {
        return invalid("GroupId can't be empty.");
    }
    if r.instance_id.as_ref().is_some_and(|i| i.is_empty()) {
        return invalid("InstanceId can't be empty.");
    }
    if r.rack_id.as_ref().is_some_and(|i| i.is_empty()) {
        return invalid("RackId can't be empty.");
    }
    match r.member_epoch {
        0 => {
            if r.rebalance_timeout_ms == -1 {
                return invalid("RebalanceTimeoutMs must be provided in first request.");
            }
            if r.topic_partitions.as_ref().is_none_or(|t| !t.is_empty()) {
                return invalid("TopicPartitions must be empty when (re-)joining.");
            }
            if r.subscribed_topic_names.is_none() && r.subscribed_topic_regex.is_none() {
                return invalid(
                    "Either SubscribedTopicNames or SubscribedTopicRegex must be non-null when (re-)joining.",
                );
            }
        }
        STATIC_LEAVE_EPOCH => {
            if r.instance_id.is_none() {
                return invalid("InstanceId can't be null.");
            }
        }
        e if e < STATIC_LEAVE_EPOCH => return invalid("MemberEpoch is invalid."),
        _ => {}
    }
    if let Some(a) = &r.server_assignor {
        if !c.config.consumer_assignors.iter().any(|x| x == a.as_str()) {
            return Err((
                err(ResponseError::UnsupportedAssignor),
                format!(
                    "ServerAssignor {a} is not supported. Supported assignors: {}.",
                    c.config.consumer_assignors.join(", ")
                ),
            ));
        }
    }
    Ok(())
}

pub(super) fn emit(
    c: &mut Coordinator,
    out: &mut Output,
    key: RecordKey,
    value: Option<RecordValue>,
) {
    c.apply(Record { key, value }, out);
}

/// What a member's metadata record says, held cheaply (the shared lists by `Arc`), to tell
/// whether a heartbeat changed it: comparing `metadata_value()`s copied every subscribed topic
/// name twice per heartbeat.
#[derive(PartialEq)]
struct MetadataKey {
    instance_id: Option<String>,
    rack_id: Option<String>,
    client_id: Arc<str>,
    client_host: Arc<str>,
    names: Arc<[String]>,
    regex: Option<String>,
    rebalance_timeout_ms: i32,
    server_assignor: Option<String>,
    classic: Option<Box<ClassicMemberMetadata>>,
}

impl MetadataKey {
    fn of(m: &ConsumerMember) -> Self {
        Self {
            instance_id: m.instance_id.clone(),
            rack_id: m.rack_id.clone(),
            client_id: m.client_id.clone(),
            client_host: m.client_host.clone(),
            names: m.subscribed_topic_names.clone(),
            regex: m.subscribed_topic_regex.clone(),
            rebalance_timeout_ms: m.rebalance_timeout_ms,
            server_assignor: m.server_assignor.clone(),
            classic: m.classic.clone(),
        }
    }
}

/// ConsumerGroupHeartbeat (`GMM.consumerGroupHeartbeat`).
pub fn heartbeat(
    c: &mut Coordinator,
    id: ReqId,
    ctx: &RequestContext,
    r: ConsumerGroupHeartbeatRequest,
    now: i64,
    out: &mut Output,
) {
    let resp = match heartbeat_inner(c, ctx, &r, now, out) {
        Ok(resp) => resp,
        Err((code, msg)) => error(code, Some(msg)),
    };
    out.replies
        .push((id, GroupResponse::ConsumerHeartbeat(resp)));
}

fn heartbeat_inner(
    c: &mut Coordinator,
    ctx: &RequestContext,
    r: &ConsumerGroupHeartbeatRequest,
    now: i64,
    out: &mut Output,
) -> Result<ConsumerGroupHeartbeatResponse, (i16, String)> {
    let v = ctx.api_version;
    validate(r, v, c)?;
    let group_id = r.group_id.0.to_string();
    if !c.config.consumer_protocol_enabled {
        return Err((
            err(ResponseError::UnsupportedVersion),
            "The consumer rebalance protocol is disabled.".into(),
        ));
    }
    // A classic group of the same id (`getOrMaybeCreateConsumerGroup`): an empty one (offsets
    // only) is converted, as Kafka's `maybeDeleteEmptyClassicGroup` does; a live one can only be
    // joined (epoch 0), which converts it online when `validateOnlineUpgrade` allows
    // (`convertToConsumerGroup`), and is GROUP_ID_NOT_FOUND otherwise.
    if let Some(g) = c.groups.get(&group_id) {
        let empty = g.members.is_empty() && g.state == super::classic::State::Empty;
        if r.member_epoch != 0 && !empty {
            return Err((
                err(ResponseError::GroupIdNotFound),
                format!("Group {group_id} is not a consumer group."),
            ));
        }
        if empty {
            if g.last_record.is_some() {
                emit(
                    c,
                    out,
                    RecordKey::GroupMetadata {
                        group: group_id.clone(),
                    },
                    None,
                );
            }
            c.groups.remove(&group_id);
        } else {
            super::migration::upgrade(c, &group_id, ctx, r, now, out)?;
        }
    }
    let mut member_id = r.member_id.to_string();
    match r.member_epoch {
        LEAVE_EPOCH | STATIC_LEAVE_EPOCH => return leave(c, &group_id, r, now, out),
        _ => {}
    }
    if r.member_epoch != 0 && !c.consumer_groups.contains_key(&group_id) {
        return Err((
            err(ResponseError::GroupIdNotFound),
            format!("Group {group_id} not found."),
        ));
    }
    let instance_id = r.instance_id.as_ref().map(|x| x.to_string());
    // `throwIfConsumerGroupIsFull`: before the member is looked up, whatever its epoch.
    if let Some(g) = c.consumer_groups.get(&group_id) {
        let known_static = instance_id.as_deref().is_some_and(|iid| {
            g.members
                .values()
                .any(|m| m.instance_id.as_deref() == Some(iid))
        });
        if !known_static
            && g.members.len() as i64 >= c.config.consumer_max_size as i64
            && (member_id.is_empty() || !g.members.contains_key(&member_id))
        {
            return Err((
                err(ResponseError::GroupMaxSizeReached),
                format!(
                    "The consumer group has reached its maximum capacity of {} members.",
                    c.config.consumer_max_size
                ),
            ));
        }
    }
    if member_id.is_empty() {
        // v0 joiners may leave the id to us (v1 clients make their own, KIP-1082).
        member_id = crate::random_base64_uuid();
    }
    let existing = c
        .consumer_groups
        .get(&group_id)
        .and_then(|g| g.members.get(&member_id))
        .cloned();
    let mut member = match (r.member_epoch, existing) {
        (0, existing) => {
            // A static member taking over its instance's slot.
            if let Some(iid) = &instance_id {
                let holder = c.consumer_groups.get(&group_id).and_then(|g| {
                    g.members
                        .values()
                        .find(|m| m.instance_id.as_deref() == Some(iid.as_str()))
                        .cloned()
                });
                if let Some(old) = holder.filter(|h| h.member_id != member_id) {
                    if old.member_epoch != STATIC_LEAVE_EPOCH {
                        return Err((
                            err(ResponseError::UnreleasedInstanceId),
                            format!(
                                "Static member {} with instance id {iid} is still active.",
                                old.member_id
                            ),
                        ));
                    }
                    return replace_static(c, &group_id, old, member_id, ctx, r, now, out);
                }
            }
            match existing {
                // Back with epoch 0 while the group still knows it (a fenced client rejoining,
                // or a rejoin that overtook its own leave): it goes on as it is, with its epoch
                // and what it holds, and its reply carries its whole assignment. Kafka's
                // `getOrMaybeCreateMember` returns the member and
                // `throwIfConsumerGroupMemberEpochIsInvalid` skips epoch 0
                // (group-coordinator/.../GroupMetadataManager.java); an empty owned list then
                // counts as revoked for a member that was revoking.
                Some(m) => m,
                None => ConsumerMember::new(&member_id),
            }
        }
        (_, None) => {
            return Err((
                err(ResponseError::UnknownMemberId),
                format!("Member {member_id} is not a member of group {group_id}."),
            ))
        }
        (epoch, Some(m)) => {
            if epoch > m.member_epoch {
                return Err((err(ResponseError::FencedMemberEpoch), format!("The consumer group member has a greater epoch ({epoch}) than the one known by the group coordinator ({}).", m.member_epoch)));
            }
            if epoch < m.member_epoch {
                // Tolerated only as a retry after a lost response (`throwIfMemberEpochIsInvalid`),
                // which carries what the member owns (Kafka's `isSubset` refuses null). Without
                // it the member may have missed the response that moved it (a stale request's):
                // accepted, it would keep its old partitions and never be sent the new ones.
                let owned_ok = owned_of(r).is_some_and(|o| subset(&o, &m.assigned));
                if epoch != m.previous_member_epoch || !owned_ok {
                    return Err((err(ResponseError::FencedMemberEpoch), format!("The consumer group member has a smaller epoch ({epoch}) than the one known by the group coordinator ({}).", m.member_epoch)));
                }
            }
            m
        }
    };
    // A member the group does not know yet (a rejoining one it still knows goes on as it is).
    let is_new = !c
        .consumer_groups
        .get(&group_id)
        .is_some_and(|g| g.members.contains_key(&member_id));
    // Update the member's metadata from the fields the request carries (null = unchanged).
    let before = MetadataKey::of(&member);
    member.instance_id = instance_id.or(member.instance_id);
    if let Some(rack) = &r.rack_id {
        member.rack_id = Some(rack.to_string());
    }
    if *member.client_id != *ctx.client_id {
        member.client_id = ctx.client_id.as_str().into();
    }
    if *member.client_host != *ctx.client_host {
        member.client_host = ctx.client_host.as_str().into();
    }
    if r.rebalance_timeout_ms != -1 {
        member.rebalance_timeout_ms = r.rebalance_timeout_ms;
    }
    if let Some(names) = &r.subscribed_topic_names {
        let mut names: Vec<String> = names.iter().map(|n| n.0.to_string()).collect();
        names.sort();
        if *member.subscribed_topic_names != *names {
            member.subscribed_topic_names = names.into();
        }
    }
    if let Some(re) = &r.subscribed_topic_regex {
        member.subscribed_topic_regex = if re.is_empty() {
            None
        } else {
            Some(re.to_string())
        };
    }
    if let Some(a) = &r.server_assignor {
        member.server_assignor = Some(a.to_string());
    }
    let metadata_changed = is_new || before != MetadataKey::of(&member);
    let subscription_changed = is_new
        || *before.names != *member.subscribed_topic_names
        || before.regex != member.subscribed_topic_regex
        || before.server_assignor != member.server_assignor;
    // Resolve a new regex now (INVALID_REGULAR_EXPRESSION before anything is written).
    let mut regex_record = None;
    if let Some(re) = &member.subscribed_topic_regex {
        let topics = c.regexes.resolve(re, &ctx.topics).map_err(|e| {
            (
                err(ResponseError::InvalidRegularExpression),
                format!("SubscribedTopicRegex `{re}` is not a valid regular expression: {e}."),
            )
        })?;
        // Only the topics this member may Describe (Kafka 4.x; see `RequestContext::topic_filter`).
        let topics: Vec<String> = match &ctx.topic_filter {
            None => topics.to_vec(),
            Some(f) => topics.iter().filter(|t| f.allows(t)).cloned().collect(),
        };
        let known = c
            .consumer_groups
            .get(&group_id)
            .and_then(|g| g.regexes.get(re));
        if known.map(Vec::as_slice) != Some(&*topics) {
            regex_record = Some((re.clone(), topics));
        }
    }
    if metadata_changed {
        emit(
            c,
            out,
            RecordKey::ConsumerGroupMemberMetadata {
                group: group_id.clone(),
                member_id: member_id.clone(),
            },
            Some(RecordValue::ConsumerGroupMemberMetadata(
                member.metadata_value(),
            )),
        );
    }
    if let Some((re, topics)) = regex_record {
        let value = ConsumerGroupRegularExpressionValue {
            topics,
            version: 0,
            timestamp: now,
        };
        emit(
            c,
            out,
            RecordKey::ConsumerGroupRegularExpression {
                group: group_id.clone(),
                regex: re,
            },
            Some(RecordValue::ConsumerGroupRegularExpression(value)),
        );
    }
    bump_epoch_if_changed(c, &group_id, subscription_changed, &ctx.topics, out);
    maybe_compute_target(c, &group_id, &ctx.topics, now, out);
    let owned = owned_of(r);
    reconcile(c, &group_id, &member_id, owned.as_ref(), now, out);
    // Session: every heartbeat pushes the deadline out.
    c.timers.schedule(
        TimerKey::ConsumerSession {
            group: group_id.clone(),
            member: member_id.clone(),
        },
        now + c.consumer_session_timeout_ms(&group_id) as i64,
    );
    let interval = heartbeat_interval_for(c, &group_id, &member_id, now);
    let m = c
        .consumer_groups
        .get_mut(&group_id)
        .and_then(|g| g.members.get_mut(&member_id))
        .expect("member");
    let mut resp = ConsumerGroupHeartbeatResponse::default()
        .with_member_id(Some(s(&member_id)))
        .with_member_epoch(m.member_epoch)
        .with_heartbeat_interval_ms(interval);
    // The assignment is sent on join and for as long as the member has not reported owning
    // exactly it. Sending it only when it changed (or to a full request) lost it for good when
    // the response that carried it never reached the member — a stale request (a timed-out
    // retry processed late) can make that change — and the member kept heartbeating with
    // partitions assigned to it that it never consumed.
    if let Some(o) = owned {
        m.sent = Some(PackedAssignment::new(&o));
    }
    if r.member_epoch == 0
        || m.sent
            .as_ref()
            .is_none_or(|sent| !sent.eq_assignment(&m.assigned))
    {
        resp.assignment = Some(response_assignment(&m.assigned));
    }
    Ok(resp)
}

/// The heartbeat interval `member_id` is told to come back after, once its heartbeat has been
/// handled. Kafka always returns the group's `consumer.heartbeat.interval.ms`
/// (`GMM.consumerGroupHeartbeat`), so a member waiting for partitions another member is still
/// revoking learns they are free only one whole interval (5 s) later. Ringleader returns the
/// shorter `group.consumer.reconciliation.heartbeat.interval.ms` while the member has a step of
/// its reconciliation left — partitions to revoke (`UnrevokedPartitions`), partitions others
/// still hold (`UnreleasedPartitions`), an epoch behind the target — and, while the group's
/// `consumer.assignment.interval.ms` since its last target has not passed, the time until it
/// has (when a new target can be computed: see below). Otherwise the group's interval.
///
/// Clients take the interval from every successful response: the Java client 4.4
/// (`AbstractHeartbeatRequestManager.onResponse` → `HeartbeatRequestState.updateHeartbeatIntervalMs`,
/// which restarts its timer when the interval changed) and librdkafka
/// (`rd_kafka_cgrp_handle_ConsumerGroupHeartbeat` sets `rkcg_heartbeat_intvl_ms`, which
/// `rd_kafka_cgrp_consumer_serve` schedules the next heartbeat with). The result never exceeds
/// the group's interval; 0 (or a value not below it) turns the short interval off.
pub(super) fn heartbeat_interval_for(
    c: &Coordinator,
    group_id: &str,
    member_id: &str,
    now: i64,
) -> i32 {
    let configured = c.consumer_heartbeat_interval_ms(group_id);
    let short = c.config.consumer_reconciliation_heartbeat_interval_ms;
    if short <= 0 || short >= configured {
        return configured;
    }
    let Some(g) = c.consumer_groups.get(group_id) else {
        return configured;
    };
    let Some(m) = g.members.get(member_id) else {
        return configured;
    };
    if m.member_epoch != STATIC_LEAVE_EPOCH
        && (m.member_epoch != g.assignment_epoch || m.state != MemberState::Stable)
    {
        return short;
    }
    // Within the assignment interval after a target was computed, the next one cannot be
    // computed yet, and joins come in bursts (a deployment starting its consumers, a rolling
    // restart): the members that joined meanwhile wait for that next target, which may take
    // partitions from this member, and they can have them only once it heartbeats again. So
    // it comes back when the next target can be computed, not a whole interval later — at
    // most one extra heartbeat per member per target, and none for a group that stays stable.
    let due = g.assignment_timestamp + c.consumer_assignment_interval_ms(group_id) as i64;
    if g.assignment_timestamp > 0 && now < due {
        return (due - now).clamp(short as i64, configured as i64) as i32;
    }
    configured
}

/// Bump the group epoch when what the group reads changed: a member's subscription, or the
/// subscribed topics' metadata (their hash, record 3) — `updateSubscriptionMetadata`.
pub(super) fn bump_epoch_if_changed(
    c: &mut Coordinator,
    group_id: &str,
    subscription_changed: bool,
    topics: &TopicsSnapshot,
    out: &mut Output,
) {
    let g = c
        .consumer_groups
        .get_mut(group_id)
        .expect("a member record created the group");
    let hash = match g.hash_memo.0 {
        Some((at, hash)) if at == topics.id() => hash,
        _ => {
            let hash = metadata_hash(&g.subscribed_names(), topics);
            g.hash_memo.0 = Some((topics.id(), hash));
            hash
        }
    };
    debug_assert_eq!(hash, metadata_hash(&g.subscribed_names(), topics));
    if subscription_changed || hash != g.metadata_hash {
        let value = ConsumerGroupMetadataValue {
            epoch: g.group_epoch + 1,
            metadata_hash: hash,
        };
        emit(
            c,
            out,
            RecordKey::ConsumerGroupMetadata {
                group: group_id.into(),
            },
            Some(RecordValue::ConsumerGroupMetadata(value)),
        );
    }
}

/// Recompute the target when the group epoch moved past it, at most once per
/// `group.consumer.assignment.interval.ms` (a burst of joins makes one new target).
pub(super) fn maybe_compute_target(
    c: &mut Coordinator,
    group_id: &str,
    topics: &TopicsSnapshot,
    now: i64,
    out: &mut Output,
) {
    let Some(g) = c.consumer_groups.get(group_id) else {
        return;
    };
    if g.group_epoch <= g.assignment_epoch || g.members.is_empty() {
        return;
    }
    // `canComputeNextTargetAssignment`: no timestamp yet (a new or emptied group) means now.
    // Otherwise the next request after the interval computes it — no timer, exactly as Kafka's
    // `maybeUpdateTargetAssignment` (members heartbeat well within an interval's reach).
    let interval = c.consumer_assignment_interval_ms(group_id) as i64;
    if g.assignment_timestamp != 0 && now < g.assignment_timestamp + interval {
        return;
    }
    if c.assigning.contains_key(group_id) {
        return; // an offloaded assignment of this group is running: it keeps its last target
    }
    // The most-requested server assignor among members, else the first configured one.
    let mut votes: BTreeMap<&str, usize> = BTreeMap::new();
    for m in g.members.values() {
        if let Some(a) = &m.server_assignor {
            *votes.entry(a.as_str()).or_default() += 1;
        }
    }
    let range = votes
        .iter()
        .max_by_key(|(_, n)| **n)
        .map(|(a, _)| *a)
        .or(c.config.consumer_assignors.first().map(String::as_str))
        .is_some_and(|a| a == "range");
    let id = c.next_job;
    let job = super::target::capture(g, topics, range, id);
    c.next_job += 1;
    c.assigning.insert(group_id.to_string(), id);
    if job.work() >= c.config.assignment_offload_min_work {
        out.jobs.push(job);
    } else {
        super::target::apply(c, job.run(), now, out);
    }
}

/// `CurrentAssignmentBuilder`: move a member one step toward the target.
pub(super) fn reconcile(
    c: &mut Coordinator,
    group_id: &str,
    member_id: &str,
    owned: Option<&Assignment>,
    now: i64,
    out: &mut Output,
) {
    let g = &c.consumer_groups[group_id];
    let m = &g.members[member_id];
    if m.member_epoch == STATIC_LEAVE_EPOCH {
        return;
    }
    let te = g.assignment_epoch;
    let revoked = match m.state {
        MemberState::UnrevokedPartitions => {
            // Still holding what it must give up: wait (its revocation deadline runs).
            if owned.is_none_or(|o| intersects(o, &m.pending_revocation)) {
                return;
            }
            true
        }
        _ if m.member_epoch == te && m.state == MemberState::Stable => return,
        _ => false,
    };
    let target = g
        .target
        .get(member_id)
        .map(PackedAssignment::to_assignment)
        .unwrap_or_default();
    let mut next = m.clone();
    if revoked {
        next.pending_revocation.clear();
    }
    // Keep what is still targeted; give up the rest first (epoch held until acknowledged).
    let mut keep = Assignment::new();
    let mut revoke = Assignment::new();
    for (t, ps) in &next.assigned {
        for p in ps {
            if target.get(t).is_some_and(|x| x.contains(p)) {
                keep.entry(*t).or_default().insert(*p);
            } else {
                revoke.entry(*t).or_default().insert(*p);
            }
        }
    }
    // Every transition goes through Kafka's `updateMemberEpoch`, which moves the epoch it had
    // into `previousMemberEpoch` even when the epoch stays (`CurrentAssignmentBuilder`).
    if !revoke.is_empty() {
        next.previous_member_epoch = next.member_epoch;
        next.assigned = keep.into();
        next.pending_revocation = revoke.into();
        next.state = MemberState::UnrevokedPartitions;
        // A classic member revokes by rejoining, which its join timeout bounds instead
        // (`maybeReconcile` arms the rebalance timeout only for consumer-protocol members).
        if !next.uses_classic() {
            c.timers.schedule(
                TimerKey::ConsumerRevocation {
                    group: group_id.into(),
                    member: member_id.into(),
                },
                now + next.rebalance_timeout_ms.max(0) as i64,
            );
        }
    } else {
        c.timers.cancel(&TimerKey::ConsumerRevocation {
            group: group_id.into(),
            member: member_id.into(),
        });
        let others = g.owned_by_others(member_id, &target);
        let mut assigned = keep;
        let mut unreleased = false;
        for (t, ps) in &target {
            for p in ps {
                if others.contains(&(*t, *p)) {
                    unreleased = true;
                } else {
                    assigned.entry(*t).or_default().insert(*p);
                }
            }
        }
        next.previous_member_epoch = next.member_epoch;
        next.member_epoch = te;
        next.assigned = assigned.into();
        next.pending_revocation.clear();
        next.state = if unreleased {
            MemberState::UnreleasedPartitions
        } else {
            MemberState::Stable
        };
    }
    next.restamp(m, te);
    if next != *m {
        current_assignment_record(c, group_id, &next, out);
    }
}

/// Leaving: epoch -1 removes the member; epoch -2 (static) keeps its slot and assignment until
/// its session runs out, so the same instance can come back without a rebalance.
fn leave(
    c: &mut Coordinator,
    group_id: &str,
    r: &ConsumerGroupHeartbeatRequest,
    now: i64,
    out: &mut Output,
) -> Result<ConsumerGroupHeartbeatResponse, (i16, String)> {
    let Some(g) = c.consumer_groups.get(group_id) else {
        return Err((
            err(ResponseError::GroupIdNotFound),
            format!("Group {group_id} not found."),
        ));
    };
    let member_id = if r.member_id.is_empty() {
        // A static member may leave by instance id alone.
        r.instance_id
            .as_ref()
            .and_then(|i| {
                g.members
                    .values()
                    .find(|m| m.instance_id.as_deref() == Some(i.as_str()))
            })
            .map(|m| m.member_id.clone())
            .unwrap_or_default()
    } else {
        r.member_id.to_string()
    };
    let Some(m) = g.members.get(&member_id).cloned() else {
        return Err((
            err(ResponseError::UnknownMemberId),
            format!("Member {member_id} is not a member of group {group_id}."),
        ));
    };
    if r.member_epoch == STATIC_LEAVE_EPOCH {
        if m.instance_id.as_deref() != r.instance_id.as_deref() {
            return Err((
                err(ResponseError::FencedInstanceId),
                "Instance id mismatch.".into(),
            ));
        }
        let mut next = m.clone();
        next.previous_member_epoch = m.member_epoch;
        next.member_epoch = STATIC_LEAVE_EPOCH;
        // `consumerGroupStaticMemberGroupLeave`: what it was revoking is released now, and
        // (`resetAssignedPartitionsEpochsToZero`) the instance that comes back commits with a
        // new member's epochs.
        next.pending_revocation.clear();
        next.restamp(&m, 0);
        for e in &mut next.assignment_epochs {
            e.2 = 0;
        }
        current_assignment_record(c, group_id, &next, out);
    } else {
        remove_member(c, group_id, &member_id, now, out);
    }
    Ok(ConsumerGroupHeartbeatResponse::default()
        .with_member_id(Some(s(&member_id)))
        .with_member_epoch(r.member_epoch)
        .with_heartbeat_interval_ms(0))
}

/// Tombstones for one member (current assignment, target, metadata) and a new group epoch; the
/// partitions it held are free at once.
pub fn remove_member(
    c: &mut Coordinator,
    group_id: &str,
    member_id: &str,
    now: i64,
    out: &mut Output,
) {
    fence_members(c, group_id, &[member_id.to_string()], now, out);
}

/// A member's records out (`GMM.removeMember`): current assignment, target (with `target`), and
/// metadata tombstones, in Kafka's order.
pub(super) fn member_tombstones(
    c: &mut Coordinator,
    group_id: &str,
    member_id: &str,
    target: bool,
    out: &mut Output,
) {
    emit(
        c,
        out,
        RecordKey::ConsumerGroupCurrentMemberAssignment {
            group: group_id.into(),
            member_id: member_id.into(),
        },
        None,
    );
    if target {
        emit(
            c,
            out,
            RecordKey::ConsumerGroupTargetAssignmentMember {
                group: group_id.into(),
                member_id: member_id.into(),
            },
            None,
        );
    }
    emit(
        c,
        out,
        RecordKey::ConsumerGroupMemberMetadata {
            group: group_id.into(),
            member_id: member_id.into(),
        },
        None,
    );
}

/// A member's records in, as `GMM.replaceMember` writes the member taking a slot: metadata,
/// target (when given), current assignment.
pub(super) fn member_records(
    c: &mut Coordinator,
    group_id: &str,
    m: &ConsumerMember,
    target: Option<ConsumerGroupTargetAssignmentMemberValue>,
    out: &mut Output,
) {
    emit(
        c,
        out,
        RecordKey::ConsumerGroupMemberMetadata {
            group: group_id.into(),
            member_id: m.member_id.clone(),
        },
        Some(RecordValue::ConsumerGroupMemberMetadata(m.metadata_value())),
    );
    if let Some(value) = target {
        emit(
            c,
            out,
            RecordKey::ConsumerGroupTargetAssignmentMember {
                group: group_id.into(),
                member_id: m.member_id.clone(),
            },
            Some(RecordValue::ConsumerGroupTargetAssignmentMember(value)),
        );
    }
    current_assignment_record(c, group_id, m, out);
}

/// A member's current assignment (record 8), keyed by its own id.
pub(super) fn current_assignment_record(
    c: &mut Coordinator,
    group_id: &str,
    m: &ConsumerMember,
    out: &mut Output,
) {
    emit(
        c,
        out,
        RecordKey::ConsumerGroupCurrentMemberAssignment {
            group: group_id.into(),
            member_id: m.member_id.clone(),
        },
        Some(RecordValue::ConsumerGroupCurrentMemberAssignment(
            m.assignment_value(),
        )),
    );
}

/// Every timer a consumer-group member may have armed.
pub(super) fn cancel_member_timers(c: &mut Coordinator, group_id: &str, member_id: &str) {
    for key in [
        TimerKey::ConsumerSession {
            group: group_id.into(),
            member: member_id.into(),
        },
        TimerKey::ConsumerRevocation {
            group: group_id.into(),
            member: member_id.into(),
        },
        TimerKey::ConsumerJoin {
            group: group_id.into(),
            member: member_id.into(),
        },
        TimerKey::ConsumerSync {
            group: group_id.into(),
            member: member_id.into(),
        },
    ] {
        c.timers.cancel(&key);
    }
}

/// `consumerGroupFenceMembers`: tombstones for each member, then one new group epoch for all
/// of them. The epoch carries the hash of what the remaining members subscribe to (0 when none
/// is left), and a group left empty gets a target assignment at that epoch with no timestamp,
/// so the next member computes a fresh one at once. When only classic-protocol members would be
/// left, the group goes back to being a classic group instead, if the policy allows it
/// (`validateOnlineDowngradeWithFencedMembers`, `convertToClassicGroup`).
fn fence_members(
    c: &mut Coordinator,
    group_id: &str,
    member_ids: &[String],
    now: i64,
    out: &mut Output,
) {
    if super::migration::downgrade_on_leave(c, group_id, member_ids, now, out) {
        return;
    }
    let mut removed = 0;
    for member_id in member_ids {
        let Some(g) = c.consumer_groups.get(group_id) else {
            return;
        };
        if !g.members.contains_key(member_id) {
            continue;
        }
        removed += 1;
        let had_target = g.target.contains_key(member_id);
        member_tombstones(c, group_id, member_id, had_target, out);
        cancel_member_timers(c, group_id, member_id);
    }
    if removed == 0 {
        return;
    }
    let g = &c.consumer_groups[group_id];
    let metadata_hash = match &c.last_topics {
        Some(topics) => metadata_hash(&g.subscribed_names(), topics),
        None => g.metadata_hash,
    };
    let epoch = g.group_epoch + 1;
    let emptied = g.members.is_empty();
    emit(
        c,
        out,
        RecordKey::ConsumerGroupMetadata {
            group: group_id.into(),
        },
        Some(RecordValue::ConsumerGroupMetadata(
            ConsumerGroupMetadataValue {
                epoch,
                metadata_hash,
            },
        )),
    );
    if emptied {
        emit(
            c,
            out,
            RecordKey::ConsumerGroupTargetAssignmentMetadata {
                group: group_id.into(),
            },
            Some(RecordValue::ConsumerGroupTargetAssignmentMetadata(
                ConsumerGroupTargetAssignmentMetadataValue {
                    assignment_epoch: epoch,
                    assignment_timestamp: 0,
                },
            )),
        );
    }
}

/// LeaveGroup (the classic API) on a consumer-protocol group: how admin clients remove its
/// members (`classicGroupLeaveToConsumerGroup`). A member named by instance id must be that
/// instance's member; every member found is fenced, all in one new group epoch.
pub fn leave_by_identities(
    c: &mut Coordinator,
    group_id: &str,
    identities: &[(String, Option<String>)],
    now: i64,
    out: &mut Output,
) -> Vec<MemberResponse> {
    let g = &c.consumer_groups[group_id];
    let mut results = Vec::new();
    let mut leaving = Vec::new();
    for (mid, iid) in identities {
        let found = match iid {
            None => g
                .members
                .contains_key(mid)
                .then(|| mid.clone())
                .ok_or(err(ResponseError::UnknownMemberId)),
            Some(iid) => match g
                .members
                .values()
                .find(|m| m.instance_id.as_deref() == Some(iid.as_str()))
            {
                None => Err(err(ResponseError::UnknownMemberId)),
                Some(m) if !mid.is_empty() && m.member_id != *mid => {
                    Err(err(ResponseError::FencedInstanceId))
                }
                Some(m) => Ok(m.member_id.clone()),
            },
        };
        let code = match found {
            Ok(id) => {
                if !leaving.contains(&id) {
                    leaving.push(id);
                }
                0
            }
            Err(code) => code,
        };
        results.push(
            MemberResponse::default()
                .with_member_id(s(mid))
                .with_group_instance_id(iid.as_deref().map(s))
                .with_error_code(code),
        );
    }
    fence_members(c, group_id, &leaving, now, out);
    results
}

/// A static member rejoining while its old incarnation is parked with epoch -2: the new member
/// id takes the old one's epoch and assignment; no rebalance for anyone else.
#[allow(clippy::too_many_arguments)]
fn replace_static(
    c: &mut Coordinator,
    group_id: &str,
    old: ConsumerMember,
    new_id: String,
    ctx: &RequestContext,
    r: &ConsumerGroupHeartbeatRequest,
    now: i64,
    out: &mut Output,
) -> Result<ConsumerGroupHeartbeatResponse, (i16, String)> {
    let target = c.consumer_groups[group_id]
        .target
        .get(&old.member_id)
        .cloned();
    let client = (ctx.client_id.as_str(), ctx.client_host.as_str());
    let mut m = old.clone();
    m.member_id = new_id.clone();
    m.member_epoch = if old.previous_member_epoch >= 0 {
        old.previous_member_epoch
    } else {
        0
    };
    m.client_id = client.0.into();
    m.client_host = client.1.into();
    if r.rebalance_timeout_ms != -1 {
        m.rebalance_timeout_ms = r.rebalance_timeout_ms;
    }
    // Old incarnation out (without a new group epoch: the slot is kept), new one in.
    member_tombstones(c, group_id, &old.member_id, target.is_some(), out);
    c.timers.cancel(&TimerKey::ConsumerSession {
        group: group_id.into(),
        member: old.member_id.clone(),
    });
    member_records(
        c,
        group_id,
        &m,
        target.as_ref().map(packed_target_value),
        out,
    );
    c.timers.schedule(
        TimerKey::ConsumerSession {
            group: group_id.into(),
            member: new_id.clone(),
        },
        now + c.consumer_session_timeout_ms(group_id) as i64,
    );
    let assigned = m.assigned.clone();
    if let Some(n) = c
        .consumer_groups
        .get_mut(group_id)
        .and_then(|g| g.members.get_mut(&new_id))
    {
        n.sent = Some(PackedAssignment::new(&assigned));
    }
    Ok(ConsumerGroupHeartbeatResponse::default()
        .with_member_id(Some(s(&new_id)))
        .with_member_epoch(m.member_epoch)
        .with_heartbeat_interval_ms(heartbeat_interval_for(c, group_id, &new_id, now))
        .with_assignment(Some(response_assignment(&assigned))))
}

/// Delete an empty consumer group: tombstones in Kafka's order (`ConsumerGroup.createGroupTombstoneRecords`):
/// target metadata (6), regexes (16), subscription metadata (4), group epoch (3).
pub fn delete_empty(c: &mut Coordinator, group_id: &str, out: &mut Output) {
    let Some(g) = c.consumer_groups.get(group_id) else {
        return;
    };
    let regexes: Vec<String> = g.regexes.keys().cloned().collect();
    emit(
        c,
        out,
        RecordKey::ConsumerGroupTargetAssignmentMetadata {
            group: group_id.into(),
        },
        None,
    );
    for regex in regexes {
        emit(
            c,
            out,
            RecordKey::ConsumerGroupRegularExpression {
                group: group_id.into(),
                regex,
            },
            None,
        );
    }
    emit(
        c,
        out,
        RecordKey::ConsumerGroupPartitionMetadata {
            group: group_id.into(),
        },
        None,
    );
    emit(
        c,
        out,
        RecordKey::ConsumerGroupMetadata {
            group: group_id.into(),
        },
        None,
    );
}

/// Session expiry or a revocation that took too long: the member is fenced (removed).
pub fn on_member_timeout(
    c: &mut Coordinator,
    group_id: &str,
    member_id: &str,
    revocation: bool,
    now: i64,
    out: &mut Output,
) {
    let Some(m) = c
        .consumer_groups
        .get(group_id)
        .and_then(|g| g.members.get(member_id))
    else {
        return;
    };
    if revocation && m.state != MemberState::UnrevokedPartitions {
        return;
    }
    remove_member(c, group_id, member_id, now, out);
}

/// Rebuild consumer-group state from one record (types 3, 5, 6, 7, 8, 16).
pub fn replay(c: &mut Coordinator, key: &RecordKey, value: &Option<RecordValue>) {
    match (key, value) {
        (
            RecordKey::ConsumerGroupMetadata { group },
            Some(RecordValue::ConsumerGroupMetadata(v)),
        ) => {
            let g = persisted_group(c, group);
            g.group_epoch = v.epoch;
            g.metadata_hash = v.metadata_hash;
        }
        (RecordKey::ConsumerGroupMetadata { group }, None) => {
            c.consumer_groups.remove(group);
            // An assignment still running for it belongs to the group that is gone.
            c.assigning.remove(group);
        }
        (
            RecordKey::ConsumerGroupMemberMetadata { group, member_id },
            Some(RecordValue::ConsumerGroupMemberMetadata(v)),
        ) => {
            let g = persisted_group(c, group);
            g.hash_memo = HashMemo::default();
            // Share strings and the subscription with this member's previous value or with a
            // neighbour's: members of a group usually have the same ones.
            let near = [
                g.members.get(member_id),
                g.members.values().next(),
                g.members.values().next_back(),
            ];
            let near = near.iter().flatten();
            let client_id = shared(
                v.client_id.as_str(),
                near.clone().map(|m| &m.client_id),
                || v.client_id.as_str().into(),
            );
            let client_host = shared(
                v.client_host.as_str(),
                near.clone().map(|m| &m.client_host),
                || v.client_host.as_str().into(),
            );
            let names = shared(
                &v.subscribed_topic_names[..],
                near.map(|m| &m.subscribed_topic_names),
                || v.subscribed_topic_names.clone().into(),
            );
            let m = g
                .members
                .entry(member_id.clone())
                .or_insert_with(|| ConsumerMember::new(member_id));
            m.instance_id = v.instance_id.clone();
            m.rack_id = v.rack_id.clone();
            m.client_id = client_id;
            m.client_host = client_host;
            m.subscribed_topic_names = names;
            m.subscribed_topic_regex = v.subscribed_topic_regex.clone().filter(|r| !r.is_empty());
            m.rebalance_timeout_ms = v.rebalance_timeout_ms;
            m.server_assignor = v.server_assignor.clone();
            m.classic = v.classic_member_metadata.clone().map(Box::new);
        }
        (RecordKey::ConsumerGroupMemberMetadata { group, member_id }, None) => {
            if let Some(g) = c.consumer_groups.get_mut(group) {
                g.members.remove(member_id);
                g.hash_memo = HashMemo::default();
            }
        }
        (
            RecordKey::ConsumerGroupTargetAssignmentMetadata { group },
            Some(RecordValue::ConsumerGroupTargetAssignmentMetadata(v)),
        ) => {
            let g = persisted_group(c, group);
            g.assignment_epoch = v.assignment_epoch;
            g.assignment_timestamp = v.assignment_timestamp;
        }
        (
            RecordKey::ConsumerGroupTargetAssignmentMember { group, member_id },
            Some(RecordValue::ConsumerGroupTargetAssignmentMember(v)),
        ) => {
            let packed = packed_from_value(v);
            let g = persisted_group(c, group);
            match g.target.get_mut(member_id) {
                Some(t) => *t = packed,
                None => {
                    g.target.insert(member_id.clone(), packed);
                }
            }
        }
        (RecordKey::ConsumerGroupTargetAssignmentMember { group, member_id }, None) => {
            if let Some(g) = c.consumer_groups.get_mut(group) {
                g.target.remove(member_id);
            }
        }
        (
            RecordKey::ConsumerGroupCurrentMemberAssignment { group, member_id },
            Some(RecordValue::ConsumerGroupCurrentMemberAssignment(v)),
        ) => {
            // `getOrCreateUninitializedMember`: in a compacted log the member's metadata
            // record may come later.
            let m = persisted_group(c, group)
                .members
                .entry(member_id.clone())
                .or_insert_with(|| ConsumerMember::new(member_id));
            m.member_epoch = v.member_epoch;
            m.previous_member_epoch = v.previous_member_epoch;
            m.state = MemberState::from_i8(v.state);
            m.assigned = from_current(&v.assigned_partitions);
            m.pending_revocation = from_current(&v.partitions_pending_revocation);
            m.assignment_epochs = epochs_from_current(v);
        }
        (
            RecordKey::ConsumerGroupRegularExpression { group, regex },
            Some(RecordValue::ConsumerGroupRegularExpression(v)),
        ) => {
            let g = persisted_group(c, group);
            g.regexes.insert(regex.clone(), v.topics.clone());
            g.hash_memo = HashMemo::default();
        }
        (RecordKey::ConsumerGroupRegularExpression { group, regex }, None) => {
            if let Some(g) = c.consumer_groups.get_mut(group) {
                g.regexes.remove(regex);
                g.hash_memo = HashMemo::default();
            }
        }
        _ => {}
    }
}

/// The consumer group a replayed record with a value belongs to, created if missing
/// (`getOrMaybeCreatePersistedConsumerGroup`). Any record of a group may come first: compaction
/// keeps only each key's last record, so a member's assignment can precede the group's metadata
/// record. An empty classic group of the same id (offsets committed before the group moved to
/// the consumer protocol) is replaced, as the live conversion does.
fn persisted_group<'a>(c: &'a mut Coordinator, group: &str) -> &'a mut ConsumerGroup {
    if !c.consumer_groups.contains_key(group)
        && c.groups
            .get(group)
            .is_some_and(|g| g.members.is_empty() && g.state == super::classic::State::Empty)
    {
        c.groups.remove(group);
    }
    c.consumer_groups
        .entry(group.to_string())
        .or_insert_with(|| ConsumerGroup {
            group_id: group.to_string(),
            // A new group starts at epoch 1, so its first member bumps it to 2, with an empty
            // target at epoch 1 (Kafka 4.4's `ModernGroup` constructor: `groupEpoch.set(1)` and
            // `TargetAssignmentMetadata.INITIAL`, epoch 1 and no timestamp): members that join
            // while the first target is computed off the request path reconcile to epoch 1
            // with nothing, never to epoch 0, which means "joining".
            group_epoch: 1,
            assignment_epoch: 1,
            ..Default::default()
        })
}

/// The records that rebuild a consumer group as it is (for snapshots), in Kafka's order.
pub fn snapshot_records(g: &ConsumerGroup, out: &mut Vec<Record>) {
    let gid = g.group_id.clone();
    for (mid, m) in &g.members {
        out.push(Record {
            key: RecordKey::ConsumerGroupMemberMetadata {
                group: gid.clone(),
                member_id: mid.clone(),
            },
            value: Some(RecordValue::ConsumerGroupMemberMetadata(m.metadata_value())),
        });
    }
    for (re, topics) in &g.regexes {
        out.push(Record {
            key: RecordKey::ConsumerGroupRegularExpression {
                group: gid.clone(),
                regex: re.clone(),
            },
            value: Some(RecordValue::ConsumerGroupRegularExpression(
                ConsumerGroupRegularExpressionValue {
                    topics: topics.clone(),
                    version: 0,
                    timestamp: 0,
                },
            )),
        });
    }
    out.push(Record {
        key: RecordKey::ConsumerGroupMetadata { group: gid.clone() },
        value: Some(RecordValue::ConsumerGroupMetadata(
            ConsumerGroupMetadataValue {
                epoch: g.group_epoch,
                metadata_hash: g.metadata_hash,
            },
        )),
    });
    for (mid, a) in &g.target {
        out.push(Record {
            key: RecordKey::ConsumerGroupTargetAssignmentMember {
                group: gid.clone(),
                member_id: mid.clone(),
            },
            value: Some(RecordValue::ConsumerGroupTargetAssignmentMember(
                packed_target_value(a),
            )),
        });
    }
    out.push(Record {
        key: RecordKey::ConsumerGroupTargetAssignmentMetadata { group: gid.clone() },
        value: Some(RecordValue::ConsumerGroupTargetAssignmentMetadata(
            ConsumerGroupTargetAssignmentMetadataValue {
                assignment_epoch: g.assignment_epoch,
                assignment_timestamp: g.assignment_timestamp,
            },
        )),
    });
    for (mid, m) in &g.members {
        out.push(Record {
            key: RecordKey::ConsumerGroupCurrentMemberAssignment {
                group: gid.clone(),
                member_id: mid.clone(),
            },
            value: Some(RecordValue::ConsumerGroupCurrentMemberAssignment(
                m.assignment_value(),
            )),
        });
    }
}

/// ConsumerGroupDescribe for one group.
pub fn describe(c: &Coordinator, group_id: &str, topics: &TopicsSnapshot) -> cgd::DescribedGroup {
    let base = cgd::DescribedGroup::default()
        .with_group_id(GroupId(s(group_id)))
        .with_authorized_operations(i32::MIN);
    let Some(g) = c.consumer_groups.get(group_id) else {
        let msg = if c.groups.contains_key(group_id) {
            format!("Group {group_id} is not a consumer group.")
        } else {
            format!("Group {group_id} not found.")
        };
        return base
            .with_error_code(err(ResponseError::GroupIdNotFound))
            .with_error_message(Some(s(&msg)));
    };
    let describe_assignment = |a: &Assignment| {
        cgd::Assignment::default().with_topic_partitions(
            a.iter()
                .map(|(t, ps)| {
                    let name = topics
                        .get_by_id(t)
                        .map(|x| x.name.clone())
                        .unwrap_or_default();
                    cgd::TopicPartitions::default()
                        .with_topic_id(*t)
                        .with_topic_name(TopicName(s(&name)))
                        .with_partitions(ps.iter().copied().collect())
                })
                .collect(),
        )
    };
    let members = g
        .members
        .values()
        .map(|m| {
            cgd::Member::default()
                .with_member_id(s(&m.member_id))
                .with_instance_id(m.instance_id.as_deref().map(s))
                .with_rack_id(m.rack_id.as_deref().map(s))
                .with_member_epoch(m.member_epoch)
                .with_client_id(s(&m.client_id))
                .with_client_host(s(&m.client_host))
                .with_subscribed_topic_names(
                    m.subscribed_topic_names
                        .iter()
                        .map(|n| TopicName(s(n)))
                        .collect(),
                )
                .with_subscribed_topic_regex(m.subscribed_topic_regex.as_deref().map(s))
                .with_assignment(describe_assignment(&m.assigned.to_assignment()))
                .with_target_assignment(describe_assignment(
                    &g.target
                        .get(&m.member_id)
                        .map(PackedAssignment::to_assignment)
                        .unwrap_or_default(),
                ))
                // KIP-1099: 0 for a member using the classic protocol, 1 for the consumer one.
                .with_member_type(if m.uses_classic() { 0 } else { 1 })
        })
        .collect();
    let assignor = {
        let mut votes: BTreeMap<&str, usize> = BTreeMap::new();
        for m in g.members.values() {
            if let Some(a) = &m.server_assignor {
                *votes.entry(a.as_str()).or_default() += 1;
            }
        }
        votes
            .iter()
            .max_by_key(|(_, n)| **n)
            .map(|(a, _)| a.to_string())
            .unwrap_or_else(|| {
                c.config
                    .consumer_assignors
                    .first()
                    .cloned()
                    .unwrap_or_default()
            })
    };
    base.with_group_state(s(g.state_name()))
        .with_group_epoch(g.group_epoch)
        .with_assignment_epoch(g.assignment_epoch)
        .with_assignor_name(s(&assignor))
        .with_members(members)
}

#[cfg(test)]
mod hash_tests {
    use super::*;
    use crate::topics::MemoryTopics;

    #[test]
    fn metadata_hash_is_the_reference_brokers() {
        // Read off a Kafka 4.4.0 reference broker's __consumer_offsets: the group subscribed to
        // `orders-java-consumer` (6 partitions, id 0URphqWbRWObI5ND5j0qXw) was written with
        // metadataHash 7664555271904736454.
        let dir = std::env::temp_dir().join(format!("rl-hash-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let reg = MemoryTopics::new(50);
        reg.create("orders-java-consumer", 6, Default::default())
            .unwrap();
        let snap = reg.snapshot();
        let id: Uuid = "d1446986-a59b-4563-9b23-9343e63d2a5f".parse().unwrap();
        // One topic: the group hash is XXH3 of that topic's hash, as a little-endian long.
        let group =
            xxhash_rust::xxh3::xxh3_64(&topic_hash(id, "orders-java-consumer", 6).to_le_bytes());
        assert_eq!(group as i64, 7664555271904736454);
        // Nothing subscribed (or only topics that do not exist) hashes to 0.
        assert_eq!(metadata_hash(&BTreeSet::new(), &snap), 0);
        assert_eq!(metadata_hash(&["missing"].into_iter().collect(), &snap), 0);
        assert_ne!(
            metadata_hash(&["orders-java-consumer"].into_iter().collect(), &snap),
            0
        );
        let _ = std::fs::remove_dir_all(&dir);
    }
}
