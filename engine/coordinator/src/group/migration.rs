//! Online migration between the classic and the consumer rebalance protocols (KIP-848's
//! upgrade path), and classic-protocol members inside a consumer group.
//!
//! - **Upgrade**: a ConsumerGroupHeartbeat joining (epoch 0) a classic group with members
//!   converts it when `group.consumer.migration.policy` allows (`GMM.validateOnlineUpgrade`,
//!   `convertToConsumerGroup`, `ConsumerGroup.fromClassicGroup`): the group epoch and every
//!   member's epoch become the generation, each member keeps the partitions of its last
//!   SyncGroup assignment as its current and target assignment, and the records say so.
//! - **Classic members of a consumer group** keep speaking JoinGroup/SyncGroup/Heartbeat: a
//!   JoinGroup reconciles the member against the group's target at once and answers with its
//!   epoch as the generation (`classicGroupJoinToConsumerGroup`), SyncGroup returns its current
//!   assignment (`classicGroupSyncToConsumerGroup`), and Heartbeat answers REBALANCE_IN_PROGRESS
//!   while it is behind the target or must revoke (`classicGroupHeartbeatToConsumerGroup`), so it
//!   rejoins; its partitions stay its own until it has rejoined without them.
//! - **Downgrade**: when the last consumer-protocol member leaves or is fenced and only classic
//!   members remain, the group becomes a classic group again at the group epoch, each member
//!   holding its target assignment, and a rebalance starts (`convertToClassicGroup`,
//!   `ClassicGroup.fromConsumerGroup`).
//!
//! Every change goes through records (`Coordinator::apply`), as in the rest of the coordinator.
//! Paths are Kafka 4.4's `group-coordinator/src/main/java/org/apache/kafka/coordinator/group/`.

use super::assignor::{Assignment, MemberAssignment};
use super::classic::{self, ClassicGroup, Member, State};
use super::consumer::{self, emit, ConsumerMember, MemberState};
use super::{err, Coordinator, GroupResponse, Output, ReqId, RequestContext, TimerKey};
use crate::topics::TopicsSnapshot;
use bytes::Bytes;
use kafka_protocol::messages::*;
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::ResponseError;
use std::collections::BTreeSet;
use wire::records::{
    ClassicMemberMetadata, ClassicProtocol, ConsumerGroupMetadataValue,
    ConsumerGroupTargetAssignmentMetadataValue, Record, RecordKey, RecordValue,
};

/// `group.consumer.migration.policy` (`ConsumerGroupMigrationPolicy`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum MigrationPolicy {
    Disabled,
    Upgrade,
    Downgrade,
    #[default]
    Bidirectional,
}

impl MigrationPolicy {
    pub const ALL: [MigrationPolicy; 4] = [
        MigrationPolicy::Disabled,
        MigrationPolicy::Downgrade,
        MigrationPolicy::Upgrade,
        MigrationPolicy::Bidirectional,
    ];

    /// Kafka's rendering (its enum's `toString` is lowercase).
    pub fn as_str(self) -> &'static str {
        match self {
            MigrationPolicy::Disabled => "disabled",
            MigrationPolicy::Downgrade => "downgrade",
            MigrationPolicy::Upgrade => "upgrade",
            MigrationPolicy::Bidirectional => "bidirectional",
        }
    }

    pub fn allows_upgrade(self) -> bool {
        matches!(
            self,
            MigrationPolicy::Upgrade | MigrationPolicy::Bidirectional
        )
    }
    pub fn allows_downgrade(self) -> bool {
        matches!(
            self,
            MigrationPolicy::Downgrade | MigrationPolicy::Bidirectional
        )
    }
}

fn s(v: &str) -> StrBytes {
    StrBytes::from_string(v.to_string())
}

/// Named partitions of the embedded protocol as topic-id partitions; topics that do not exist
/// (any more) are left out, as Kafka's `Utils.toTopicPartitionMap` does.
fn by_id<'a>(
    named: impl IntoIterator<Item = (&'a str, &'a [i32])>,
    topics: &TopicsSnapshot,
) -> Assignment {
    let mut a = Assignment::new();
    for (name, partitions) in named {
        if let Some(t) = topics.get(name) {
            if !partitions.is_empty() {
                a.entry(t.id)
                    .or_default()
                    .extend(partitions.iter().copied());
            }
        }
    }
    a
}

/// A member's partitions as the embedded protocol's assignment, at `version`.
fn assignment_bytes(a: &MemberAssignment, topics: &TopicsSnapshot, version: i16) -> Bytes {
    let named: Vec<(StrBytes, Vec<i32>)> = a
        .iter()
        .filter_map(|(id, ps)| {
            topics
                .get_by_id(id)
                .map(|t| (s(&t.name), ps.iter().copied().collect()))
        })
        .collect();
    wire::consumer_protocol::encode_assignment(named, version)
}

/// The embedded protocol version of a member's metadata (`ConsumerProtocol.deserializeVersion`),
/// within what this build writes (`checkAssignmentVersion`).
fn protocol_version(metadata: &[u8]) -> i16 {
    match metadata {
        [a, b, ..] => i16::from_be_bytes([*a, *b]).clamp(0, wire::consumer_protocol::VERSION),
        _ => 0,
    }
}

fn classic_metadata(
    session_timeout_ms: i32,
    protocols: &[(String, Bytes)],
) -> ClassicMemberMetadata {
    ClassicMemberMetadata {
        session_timeout_ms,
        supported_protocols: protocols
            .iter()
            .map(|(name, metadata)| ClassicProtocol {
                name: name.clone(),
                metadata: metadata.to_vec(),
            })
            .collect(),
    }
}

/// A member id for a classic member joining a consumer group without one: a Kafka `Uuid`
/// string (`Uuid.randomUuid().toString()`), seeded in the simulator.
fn new_member_id(c: &mut Coordinator) -> String {
    match c.member_ids.as_mut() {
        Some(ids) => crate::base64_uuid(ids.next_uuid()),
        None => crate::random_base64_uuid(),
    }
}

fn upgrade_refused(group_id: &str, why: &str) -> (i16, String) {
    (
        err(ResponseError::GroupIdNotFound),
        format!("Cannot upgrade classic group {group_id} to consumer group because {why}."),
    )
}

/// Convert the live classic group `group_id` into a consumer group, for a consumer-protocol
/// member joining it (`GMM.getOrMaybeCreateConsumerGroup` → `validateOnlineUpgrade` →
/// `convertToConsumerGroup`). Nothing is changed when it fails.
pub(super) fn upgrade(
    c: &mut Coordinator,
    group_id: &str,
    ctx: &RequestContext,
    joiner: &ConsumerGroupHeartbeatRequest,
    now: i64,
    out: &mut Output,
) -> Result<(), (i16, String)> {
    let g = &c.groups[group_id];
    if !c.config.migration_policy.allows_upgrade() {
        return Err(upgrade_refused(group_id, "online upgrade is disabled"));
    }
    if g.protocol_type.as_deref() != Some("consumer") {
        return Err(upgrade_refused(
            group_id,
            "the group does not use the consumer embedded protocol",
        ));
    }
    let max = c.config.consumer_max_size as i64;
    if g.members.len() as i64 > max {
        return Err(upgrade_refused(
            group_id,
            "the group size exceeds the consumer group maximum size",
        ));
    }
    // Kafka runs the joiner's `throwIfConsumerGroupIsFull` on the converted group and, when it
    // throws, drops the conversion with the failed request; checked first here, to the same end.
    let joiner_known = joiner.instance_id.as_ref().is_some_and(|iid| {
        g.members
            .values()
            .any(|m| m.instance_id.as_deref() == Some(iid.as_str()))
    });
    if !joiner_known && g.members.len() as i64 >= max {
        return Err((
            err(ResponseError::GroupMaxSizeReached),
            format!("The consumer group has reached its maximum capacity of {max} members."),
        ));
    }
    // Likewise a joiner whose regex does not compile fails without a conversion.
    if let Some(re) = joiner
        .subscribed_topic_regex
        .as_deref()
        .filter(|r| !r.is_empty())
    {
        if let Err(e) = super::regex_cache::compile(re) {
            return Err((
                err(ResponseError::InvalidRegularExpression),
                format!("SubscribedTopicRegex `{re}` is not a valid regular expression: {e}."),
            ));
        }
    }
    // Decode every member before anything changes (`ConsumerGroup.fromClassicGroup`).
    let generation = g.generation;
    let malformed = || upgrade_refused(group_id, "the embedded consumer protocol is malformed");
    let mut members: Vec<(ConsumerMember, Assignment)> = Vec::with_capacity(g.members.len());
    for m in g.members.values() {
        let assigned = if m.assignment.is_empty() {
            Assignment::new()
        } else {
            let a = wire::consumer_protocol::decode_assignment(&m.assignment)
                .map_err(|_| malformed())?;
            if a.user_data.as_ref().is_some_and(|u| !u.is_empty()) {
                return Err(upgrade_refused(group_id, "an unsupported custom assignor is in use. Please refer to the documentation or switch to a default assignor before re-attempting the upgrade"));
            }
            by_id(
                a.assigned_partitions
                    .iter()
                    .map(|t| (t.topic.0.as_str(), &t.partitions[..])),
                &ctx.topics,
            )
        };
        let metadata = match g.protocol_name.as_deref() {
            Some(p) => m.metadata_for(p),
            None => m
                .protocols
                .first()
                .map(|(_, b)| b.clone())
                .unwrap_or_default(),
        };
        let sub =
            wire::consumer_protocol::decode_subscription(&metadata).map_err(|_| malformed())?;
        let mut names: Vec<String> = sub.topics.iter().map(|t| t.to_string()).collect();
        names.sort();
        names.dedup();
        let mut cm = ConsumerMember::new(&m.member_id);
        cm.instance_id = m.instance_id.clone();
        cm.rack_id = sub.rack_id.as_ref().map(|r| r.to_string());
        cm.client_id = m.client_id.as_str().into();
        cm.client_host = m.client_host.as_str().into();
        cm.subscribed_topic_names = names.into();
        cm.rebalance_timeout_ms = m.rebalance_timeout_ms;
        cm.member_epoch = generation;
        cm.previous_member_epoch = generation;
        cm.state = MemberState::Stable;
        cm.assigned = assigned.clone().into();
        // `Utils.toAssignmentWithEpochs(assigned, generation)`.
        cm.restamp(&ConsumerMember::new(&m.member_id), generation);
        cm.classic = Some(Box::new(classic_metadata(
            m.session_timeout_ms,
            &m.protocols,
        )));
        members.push((cm, assigned));
    }
    // Parked joins and syncs learn the group moved on (`completeAllJoinFutures`,
    // `completeAllSyncFutures` with REBALANCE_IN_PROGRESS), and the classic timers go.
    let code = err(ResponseError::RebalanceInProgress);
    let g = c.groups.get_mut(group_id).expect("present");
    let pending: Vec<String> = g.pending_members.drain().collect();
    let mut timers = vec![
        TimerKey::Join {
            group: group_id.into(),
        },
        TimerKey::Sync {
            group: group_id.into(),
        },
    ];
    for m in g.members.values_mut() {
        if let Some(p) = m.awaiting_join.take() {
            classic::reply_join(
                out,
                p.req,
                classic::join_error(code, &m.member_id, p.version),
            );
        }
        if let Some(p) = m.awaiting_sync.take() {
            classic::reply_sync(out, p.req, code, Bytes::new(), None);
        }
        timers.push(TimerKey::Heartbeat {
            group: group_id.into(),
            member: m.member_id.clone(),
        });
    }
    for p in pending {
        timers.push(TimerKey::PendingMember {
            group: group_id.into(),
            member: p,
        });
    }
    for t in &timers {
        c.timers.cancel(t);
    }
    // `ClassicGroup.createGroupTombstoneRecords`, then `ConsumerGroup.createConsumerGroupRecords`.
    emit(
        c,
        out,
        RecordKey::GroupMetadata {
            group: group_id.into(),
        },
        None,
    );
    c.groups.remove(group_id);
    for (m, _) in &members {
        emit(
            c,
            out,
            RecordKey::ConsumerGroupMemberMetadata {
                group: group_id.into(),
                member_id: m.member_id.clone(),
            },
            Some(RecordValue::ConsumerGroupMemberMetadata(m.metadata_value())),
        );
    }
    let hash =
        consumer::metadata_hash(&c.consumer_groups[group_id].subscribed_names(), &ctx.topics);
    emit(
        c,
        out,
        RecordKey::ConsumerGroupMetadata {
            group: group_id.into(),
        },
        Some(RecordValue::ConsumerGroupMetadata(
            ConsumerGroupMetadataValue {
                epoch: generation,
                metadata_hash: hash,
            },
        )),
    );
    for (m, assigned) in &members {
        emit(
            c,
            out,
            RecordKey::ConsumerGroupTargetAssignmentMember {
                group: group_id.into(),
                member_id: m.member_id.clone(),
            },
            Some(RecordValue::ConsumerGroupTargetAssignmentMember(
                consumer::target_value(assigned),
            )),
        );
    }
    emit(
        c,
        out,
        RecordKey::ConsumerGroupTargetAssignmentMetadata {
            group: group_id.into(),
        },
        Some(RecordValue::ConsumerGroupTargetAssignmentMetadata(
            ConsumerGroupTargetAssignmentMetadataValue {
                assignment_epoch: generation,
                assignment_timestamp: 0,
            },
        )),
    );
    for (m, _) in &members {
        consumer::current_assignment_record(c, group_id, m, out);
        restart_session(c, group_id, m, now);
    }
    debug_assert!(c.consumer_groups[group_id]
        .members
        .values()
        .all(|m| m.uses_classic() && m.member_epoch == generation));
    tracing::info!(
        group = group_id,
        generation,
        members = members.len(),
        "converted the classic group to a consumer group"
    );
    Ok(())
}

/// `ConsumerGroup.supportsClassicProtocols`: a classic joiner must use the `consumer` protocol
/// type and share at least one protocol name with every classic member already in the group.
fn supports_classic_protocols(
    g: &consumer::ConsumerGroup,
    protocol_type: &str,
    protocols: &[(String, Bytes)],
) -> bool {
    if protocol_type != "consumer" {
        return false;
    }
    if g.members.is_empty() {
        return !protocols.is_empty();
    }
    protocols.iter().any(|(name, _)| {
        g.members.values().all(|m| {
            m.classic
                .as_ref()
                .is_none_or(|cm| cm.supported_protocols.iter().any(|p| p.name == *name))
        })
    })
}

/// JoinGroup from a classic member into a (non-empty) consumer group
/// (`GMM.classicGroupJoinToConsumerGroup`). Answered at once: the member is reconciled in this
/// request, and the generation it gets is its member epoch.
pub(super) fn join(
    c: &mut Coordinator,
    id: ReqId,
    ctx: &RequestContext,
    r: JoinGroupRequest,
    now: i64,
    out: &mut Output,
) {
    let v = ctx.api_version;
    let resp = match join_inner(c, ctx, &r, now, out) {
        Ok(resp) => resp,
        Err((code, member_id)) => classic::join_error(code, &member_id, v),
    };
    classic::reply_join(out, id, resp);
}

fn join_inner(
    c: &mut Coordinator,
    ctx: &RequestContext,
    r: &JoinGroupRequest,
    now: i64,
    out: &mut Output,
) -> Result<JoinGroupResponse, (i16, String)> {
    let v = ctx.api_version;
    let group_id = r.group_id.0.to_string();
    let fail = |e: ResponseError, member: &str| (err(e), member.to_string());
    // `throwIfClassicMemberCannotJoinConsumerGroup`.
    if c.config.migration_policy == MigrationPolicy::Disabled {
        return Err(fail(ResponseError::InconsistentGroupProtocol, &r.member_id));
    }
    let unknown = r.member_id.is_empty();
    let member_id = if unknown {
        new_member_id(c)
    } else {
        r.member_id.to_string()
    };
    let instance_id = r.group_instance_id.as_ref().map(|i| i.to_string());
    let protocols: Vec<(String, Bytes)> = r
        .protocols
        .iter()
        .map(|p| (p.name.to_string(), p.metadata.clone()))
        .collect();
    let g = &c.consumer_groups[&group_id];
    // `throwIfConsumerGroupIsFull`.
    let known_static = instance_id.as_deref().is_some_and(|iid| {
        g.members
            .values()
            .any(|m| m.instance_id.as_deref() == Some(iid))
    });
    if !known_static
        && !g.members.contains_key(&member_id)
        && g.members.len() as i64 >= c.config.consumer_max_size as i64
    {
        return Err(fail(ResponseError::GroupMaxSizeReached, &member_id));
    }
    if !supports_classic_protocols(g, &r.protocol_type, &protocols) {
        return Err(fail(ResponseError::InconsistentGroupProtocol, &member_id));
    }
    // `JoinGroupRequest.requiresKnownMemberId`: from v4 a dynamic member first gets its id.
    if v >= 4 && unknown && instance_id.is_none() {
        return Err(fail(ResponseError::MemberIdRequired, &member_id));
    }
    // `deserializeSubscription`: the first protocol's metadata.
    let sub = protocols
        .first()
        .and_then(|(_, m)| wire::consumer_protocol::decode_subscription(m).ok())
        .ok_or_else(|| fail(ResponseError::InconsistentGroupProtocol, &member_id))?;
    // The member (`getOrMaybeSubscribeStaticConsumerGroupMember` with `createIfNotExists` =
    // the id is unknown; the dynamic variant always creates): a static member joining without
    // an id takes over its instance's slot (`replaceMember`: epoch 0, the old one's partitions);
    // with an id it must be the instance's current member.
    let holder = instance_id.as_deref().and_then(|iid| {
        g.members
            .values()
            .find(|m| m.instance_id.as_deref() == Some(iid))
            .cloned()
    });
    let mut replaced_consumer_member = false;
    let mut member = match (holder, &instance_id) {
        (Some(old), Some(_)) if unknown => {
            replaced_consumer_member = !old.uses_classic();
            replace_member(c, &group_id, old, &member_id, out)
        }
        (Some(old), Some(_)) => {
            if old.member_id != member_id {
                return Err(fail(ResponseError::FencedInstanceId, &member_id));
            }
            old
        }
        (None, Some(_)) if !unknown => {
            return Err(fail(ResponseError::UnknownMemberId, &member_id));
        }
        _ => c.consumer_groups[&group_id]
            .members
            .get(&member_id)
            .cloned()
            .unwrap_or_else(|| ConsumerMember::new(&member_id)),
    };
    let is_new = !c.consumer_groups[&group_id]
        .members
        .contains_key(&member_id);
    let before = member.metadata_value();
    let before_topics = member.subscribed_topic_names.clone();
    member.instance_id = instance_id.or(member.instance_id);
    if let Some(rack) = &sub.rack_id {
        member.rack_id = Some(rack.to_string());
    }
    let rebalance_timeout_ms = if v == 0 {
        r.session_timeout_ms
    } else {
        r.rebalance_timeout_ms
    };
    if rebalance_timeout_ms != -1 {
        member.rebalance_timeout_ms = rebalance_timeout_ms;
    }
    let mut names: Vec<String> = sub.topics.iter().map(|t| t.to_string()).collect();
    names.sort();
    names.dedup();
    if *member.subscribed_topic_names != *names {
        member.subscribed_topic_names = names.into();
    }
    member.subscribed_topic_regex = None;
    if *member.client_id != *ctx.client_id {
        member.client_id = ctx.client_id.as_str().into();
    }
    if *member.client_host != *ctx.client_host {
        member.client_host = ctx.client_host.as_str().into();
    }
    member.classic = Some(Box::new(classic_metadata(r.session_timeout_ms, &protocols)));
    // `hasMemberSubscriptionChanged`: a changed member is written; only new topic names bump
    // the group epoch (or a change of the topics' metadata, checked next).
    let subscription_changed = *before_topics != *member.subscribed_topic_names;
    if is_new || before != member.metadata_value() {
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
    consumer::bump_epoch_if_changed(c, &group_id, subscription_changed, &ctx.topics, out);
    // What it owns is in its subscription (`ownedPartitions`, v1+ of the embedded protocol).
    let owned = by_id(
        sub.owned_partitions
            .iter()
            .map(|t| (t.topic.0.as_str(), &t.partitions[..])),
        &ctx.topics,
    );
    let protocol_name = protocols
        .first()
        .map(|(n, _)| n.clone())
        .unwrap_or_default();
    let response = |epoch: i32| {
        JoinGroupResponse::default()
            .with_member_id(s(&member_id))
            .with_generation_id(epoch)
            .with_protocol_type(Some(s("consumer")))
            .with_protocol_name(Some(s(&protocol_name)))
            .with_leader(s(""))
    };
    // A static classic member that took the place of the last consumer-protocol member leaves
    // only classic members: the group goes back to classic (`validateOnlineDowngradeWithReplacedMember`,
    // then `convertToClassicGroup` with the joining member) instead of computing a target —
    // rebalancing if the target is stale, else after reconciling the joiner against it.
    let g = &c.consumer_groups[&group_id];
    if replaced_consumer_member
        && c.config.migration_policy.allows_downgrade()
        && g.members.values().all(ConsumerMember::uses_classic)
        && g.members.len() as i64 <= c.config.max_size as i64
    {
        let rebalance = g.assignment_epoch < g.group_epoch;
        if !rebalance {
            consumer::reconcile(c, &group_id, &member_id, Some(&owned), now, out);
        }
        let g = &c.consumer_groups[&group_id];
        let epoch = g.members[&member_id].member_epoch;
        let members: Vec<ConsumerMember> = g.members.values().cloned().collect();
        c.timers.cancel(&TimerKey::ConsumerJoin {
            group: group_id.clone(),
            member: member_id.clone(),
        });
        to_classic(c, &group_id, members, rebalance, now, out);
        return Ok(response(epoch));
    }
    consumer::maybe_compute_target(c, &group_id, &ctx.topics, now, out);
    consumer::reconcile(c, &group_id, &member_id, Some(&owned), now, out);
    let resp = response(c.consumer_groups[&group_id].members[&member_id].member_epoch);
    // Once written: the join timeout is over, the session runs on the member's own timeout,
    // and a SyncGroup is due within the rebalance timeout (`scheduleConsumerGroupSyncTimeout`).
    let member_key = |f: fn(String, String) -> TimerKey| f(group_id.clone(), member_id.clone());
    c.timers
        .cancel(&member_key(|group, member| TimerKey::ConsumerJoin {
            group,
            member,
        }));
    c.timers.schedule(
        member_key(|group, member| TimerKey::ConsumerSession { group, member }),
        now + r.session_timeout_ms as i64,
    );
    c.timers.schedule(
        member_key(|group, member| TimerKey::ConsumerSync { group, member }),
        now + rebalance_timeout_ms.max(0) as i64,
    );
    Ok(resp)
}

/// `GMM.replaceMember` for a static member rejoining under a new member id: the old member's
/// records go, the new one starts at epoch 0 with the old one's assignment and target.
fn replace_member(
    c: &mut Coordinator,
    group_id: &str,
    old: ConsumerMember,
    new_id: &str,
    out: &mut Output,
) -> ConsumerMember {
    let target = c.consumer_groups[group_id]
        .target
        .get(&old.member_id)
        .cloned();
    // Kafka's `replaceMember` writes the target tombstone and record even when there is none.
    consumer::member_tombstones(c, group_id, &old.member_id, true, out);
    consumer::cancel_member_timers(c, group_id, &old.member_id);
    let mut m = old.clone();
    m.member_id = new_id.to_string();
    m.member_epoch = 0;
    m.previous_member_epoch = 0;
    m.sent = None;
    let value = target
        .as_ref()
        .map(consumer::packed_target_value)
        .unwrap_or_else(|| consumer::target_value(&Assignment::new()));
    consumer::member_records(c, group_id, &m, Some(value), out);
    c.consumer_groups[group_id].members[new_id].clone()
}

/// `GMM.validateConsumerGroupMember` and `throwIfMemberDoesNotUseClassicProtocol`: the member a
/// classic SyncGroup or Heartbeat names, which must use the classic protocol.
fn classic_member<'a>(
    g: &'a consumer::ConsumerGroup,
    member_id: &str,
    instance_id: Option<&str>,
) -> Result<&'a ConsumerMember, i16> {
    let m = match instance_id {
        None => g.members.get(member_id),
        Some(iid) => {
            let m = g
                .members
                .values()
                .find(|m| m.instance_id.as_deref() == Some(iid));
            if m.is_some_and(|m| m.member_id != member_id) {
                return Err(err(ResponseError::FencedInstanceId));
            }
            m
        }
    };
    match m {
        Some(m) if m.uses_classic() => Ok(m),
        _ => Err(err(ResponseError::UnknownMemberId)),
    }
}

/// (Re)start a member's session, on its JoinGroup's timeout for a classic member
/// (`scheduleConsumerGroupSessionTimeout` with `classicProtocolSessionTimeout`).
fn restart_session(c: &mut Coordinator, group_id: &str, m: &ConsumerMember, now: i64) {
    let session = m.session_timeout_ms(c.consumer_session_timeout_ms(group_id));
    c.timers.schedule(
        TimerKey::ConsumerSession {
            group: group_id.into(),
            member: m.member_id.clone(),
        },
        now + session,
    );
}

/// A classic member told to rejoin must do so within its rebalance timeout, or it is fenced
/// (`scheduleConsumerGroupJoinTimeoutIfAbsent`).
fn schedule_join_timeout_if_absent(
    c: &mut Coordinator,
    group_id: &str,
    member: &ConsumerMember,
    now: i64,
) {
    let key = TimerKey::ConsumerJoin {
        group: group_id.into(),
        member: member.member_id.clone(),
    };
    if c.timers.deadline(&key).is_none() {
        let deadline = now + member.rebalance_timeout_ms.max(0) as i64;
        c.timers.schedule(key, deadline);
    }
}

/// SyncGroup from a classic member of a consumer group (`GMM.classicGroupSyncToConsumerGroup`):
/// its current assignment, in its own embedded protocol version.
pub(super) fn sync(
    c: &mut Coordinator,
    id: ReqId,
    ctx: &RequestContext,
    r: SyncGroupRequest,
    now: i64,
    out: &mut Output,
) {
    let group_id = r.group_id.0.to_string();
    let result = (|| {
        let g = &c.consumer_groups[&group_id];
        let m = classic_member(g, &r.member_id, r.group_instance_id.as_deref())?;
        if r.generation_id != m.member_epoch {
            return Err(err(ResponseError::IllegalGeneration));
        }
        let first = m
            .classic
            .as_ref()
            .and_then(|cm| cm.supported_protocols.first())
            .cloned()
            .unwrap_or_default();
        if r.protocol_type
            .as_ref()
            .is_some_and(|t| t.as_str() != "consumer")
            || r.protocol_name
                .as_ref()
                .is_some_and(|n| n.as_str() != first.name)
        {
            return Err(err(ResponseError::InconsistentGroupProtocol));
        }
        // `throwIfRebalanceInProgress`.
        if g.assignment_epoch > m.member_epoch && m.state != MemberState::UnrevokedPartitions {
            let m = m.clone();
            schedule_join_timeout_if_absent(c, &group_id, &m, now);
            return Err(err(ResponseError::RebalanceInProgress));
        }
        let bytes = assignment_bytes(&m.assigned, &ctx.topics, protocol_version(&first.metadata));
        let m = m.clone();
        c.timers.cancel(&TimerKey::ConsumerSync {
            group: group_id.clone(),
            member: m.member_id.clone(),
        });
        restart_session(c, &group_id, &m, now);
        Ok(bytes)
    })();
    let resp = match result {
        Ok(assignment) => SyncGroupResponse::default()
            .with_protocol_type(r.protocol_type.clone())
            .with_protocol_name(r.protocol_name.clone())
            .with_assignment(assignment),
        Err(code) => SyncGroupResponse::default().with_error_code(code),
    };
    out.replies.push((id, GroupResponse::Sync(resp)));
}

/// Heartbeat from a classic member of a consumer group
/// (`GMM.classicGroupHeartbeatToConsumerGroup`): REBALANCE_IN_PROGRESS while the member is
/// behind the target, must revoke, or could now get partitions it was waiting for — it rejoins.
pub(super) fn heartbeat(c: &mut Coordinator, r: &HeartbeatRequest, now: i64) -> i16 {
    let group_id = r.group_id.0.as_str();
    let g = &c.consumer_groups[group_id];
    let m = match classic_member(g, &r.member_id, r.group_instance_id.as_deref()) {
        Ok(m) => m,
        Err(code) => return code,
    };
    if r.generation_id != m.member_epoch {
        return err(ResponseError::IllegalGeneration);
    }
    let rejoin = m.member_epoch < g.assignment_epoch
        || m.state == MemberState::UnrevokedPartitions
        || (m.state == MemberState::UnreleasedPartitions && !waiting_on_unreleased(g, m));
    let m = m.clone();
    restart_session(c, group_id, &m, now);
    if rejoin {
        schedule_join_timeout_if_absent(c, group_id, &m, now);
        return err(ResponseError::RebalanceInProgress);
    }
    0
}

/// `ConsumerGroup.waitingOnUnreleasedPartition`: some partition of the member's target is still
/// held by another member.
fn waiting_on_unreleased(g: &consumer::ConsumerGroup, m: &ConsumerMember) -> bool {
    let Some(target) = g.target.get(&m.member_id) else {
        return false;
    };
    let others = g.owned_by_others(&m.member_id, &target.to_assignment());
    target.iter().any(|(t, ps)| {
        ps.iter().any(|p| {
            !m.assigned.get(&t).is_some_and(|a| a.contains(p)) && others.contains(&(t, *p))
        })
    })
}

/// Members `leaving` are about to be fenced: when every member left behind uses the classic
/// protocol, convert the group back to a classic group instead, if the policy and
/// `group.max.size` allow (`validateOnlineDowngradeWithFencedMembers`). Returns whether it did.
pub(super) fn downgrade_on_leave(
    c: &mut Coordinator,
    group_id: &str,
    leaving: &[String],
    now: i64,
    out: &mut Output,
) -> bool {
    if !c.config.migration_policy.allows_downgrade() {
        return false;
    }
    let Some(g) = c.consumer_groups.get(group_id) else {
        return false;
    };
    // The common case first, in O(1) for a consumer group: a member that stays speaks the
    // consumer protocol (every fence and leave comes through here).
    if g.members
        .values()
        .any(|m| !m.uses_classic() && !leaving.contains(&m.member_id))
    {
        return false;
    }
    let leaving: BTreeSet<&str> = leaving
        .iter()
        .map(String::as_str)
        .filter(|m| g.members.contains_key(*m))
        .collect();
    if leaving.is_empty() {
        return false;
    }
    let remaining: Vec<&ConsumerMember> = g
        .members
        .values()
        .filter(|m| !leaving.contains(m.member_id.as_str()))
        .collect();
    if remaining.is_empty()
        || !remaining.iter().all(|m| m.uses_classic())
        || !c.config.migration_policy.allows_downgrade()
        || remaining.len() as i64 > c.config.max_size as i64
    {
        return false;
    }
    let remaining: Vec<ConsumerMember> = remaining.into_iter().cloned().collect();
    to_classic(c, group_id, remaining, true, now, out);
    true
}

/// `GMM.convertToClassicGroup` with `ClassicGroup.fromConsumerGroup`: the consumer group's
/// records are tombstoned, `remaining` become the members of a Stable classic group at the group
/// epoch, each assigned its target, and (if `rebalance`) a rebalance starts.
fn to_classic(
    c: &mut Coordinator,
    group_id: &str,
    remaining: Vec<ConsumerMember>,
    rebalance: bool,
    now: i64,
    out: &mut Output,
) {
    let g = c.consumer_groups[group_id].clone();
    let topics = c.last_topics.clone();
    // `ConsumerGroup.createGroupTombstoneRecords`, in its order.
    let ids: Vec<String> = g.members.keys().cloned().collect();
    let per_member = |f: fn(String, String) -> RecordKey| {
        ids.iter()
            .map(|m| f(group_id.to_string(), m.clone()))
            .collect::<Vec<_>>()
    };
    let mut keys = per_member(
        |group, member_id| RecordKey::ConsumerGroupCurrentMemberAssignment { group, member_id },
    );
    keys.extend(per_member(|group, member_id| {
        RecordKey::ConsumerGroupTargetAssignmentMember { group, member_id }
    }));
    keys.push(RecordKey::ConsumerGroupTargetAssignmentMetadata {
        group: group_id.into(),
    });
    keys.extend(per_member(|group, member_id| {
        RecordKey::ConsumerGroupMemberMetadata { group, member_id }
    }));
    for regex in g.regexes.keys() {
        keys.push(RecordKey::ConsumerGroupRegularExpression {
            group: group_id.into(),
            regex: regex.clone(),
        });
    }
    keys.push(RecordKey::ConsumerGroupPartitionMetadata {
        group: group_id.into(),
    });
    keys.push(RecordKey::ConsumerGroupMetadata {
        group: group_id.into(),
    });
    for key in keys {
        emit(c, out, key, None);
    }
    for m in &ids {
        consumer::cancel_member_timers(c, group_id, m);
    }
    debug_assert!(!c.consumer_groups.contains_key(group_id));
    // The classic group, Stable at the group epoch, members in the consumer group's order.
    let mut cg = ClassicGroup::empty(group_id, now);
    cg.state = State::Stable;
    cg.generation = g.group_epoch;
    cg.protocol_type = Some("consumer".into());
    for m in &remaining {
        let classic = m.classic.as_deref().cloned().unwrap_or_default();
        cg.members.insert(
            m.member_id.clone(),
            Member {
                member_id: m.member_id.clone(),
                instance_id: m.instance_id.clone(),
                client_id: m.client_id.to_string(),
                client_host: m.client_host.to_string(),
                rebalance_timeout_ms: m.rebalance_timeout_ms,
                session_timeout_ms: classic.session_timeout_ms,
                protocol_type: "consumer".into(),
                protocols: classic
                    .supported_protocols
                    .iter()
                    .map(|p| (p.name.clone(), Bytes::from(p.metadata.clone())))
                    .collect(),
                assignment: Bytes::new(),
                awaiting_join: None,
                awaiting_sync: None,
                is_new: false,
                session_deadline: 0,
                session_timer: None,
            },
        );
    }
    cg.leader = remaining.first().map(|m| m.member_id.clone());
    cg.protocol_name = cg.select_protocol();
    let protocol = cg.protocol_name.clone().unwrap_or_default();
    for m in cg.members.values_mut() {
        let target = g
            .target
            .get(&m.member_id)
            .map(|t| MemberAssignment::from(t.to_assignment()))
            .unwrap_or_default();
        let version = protocol_version(&m.metadata_for(&protocol));
        m.assignment = match &topics {
            Some(t) => assignment_bytes(&target, t, version),
            None => Bytes::new(),
        };
    }
    cg.subscribed_topics = cg.compute_subscribed_topics();
    let value = cg.to_record_value();
    c.groups.insert(group_id.to_string(), cg);
    // `createClassicGroupRecords`; replaying it keeps the members' other protocols.
    c.apply(
        Record {
            key: RecordKey::GroupMetadata {
                group: group_id.into(),
            },
            value: Some(RecordValue::GroupMetadata(value)),
        },
        out,
    );
    for m in &remaining {
        let timeout = m.session_timeout_ms(c.consumer_session_timeout_ms(group_id));
        classic::schedule_heartbeat(c, group_id, &m.member_id, timeout, now);
    }
    tracing::info!(
        group = group_id,
        generation = g.group_epoch,
        members = remaining.len(),
        "converted the consumer group to a classic group"
    );
    if rebalance {
        classic::prepare_rebalance(c, group_id, now, out);
    }
}
