//! Classic consumer groups: JoinGroup, SyncGroup, Heartbeat, LeaveGroup, DescribeGroups and
//! ListGroups, with Kafka's timing rules (reference §5.5; `GroupMetadataManager.classicGroup*`,
//! `group/classic/ClassicGroup.java`, `ClassicGroupMember.java`).

use super::{
    err, Coordinator, GroupResponse, Output, ReqId, RequestContext, TimerKey,
    NEW_MEMBER_JOIN_TIMEOUT_MS,
};
use bytes::Bytes;
use indexmap::IndexMap;
use kafka_protocol::messages::describe_groups_response::{DescribedGroup, DescribedGroupMember};
use kafka_protocol::messages::join_group_response::JoinGroupResponseMember;
use kafka_protocol::messages::leave_group_response::MemberResponse;
use kafka_protocol::messages::list_groups_response::ListedGroup;
use kafka_protocol::messages::*;
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::ResponseError;
use std::collections::{BTreeSet, HashSet};
use wire::records::{GroupMetadataMember, GroupMetadataValue, Record, RecordKey, RecordValue};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum State {
    Empty,
    PreparingRebalance,
    CompletingRebalance,
    Stable,
    Dead,
}

impl State {
    /// The names Kafka reports (`ClassicGroupState.toString`).
    pub fn name(self) -> &'static str {
        match self {
            State::Empty => "Empty",
            State::PreparingRebalance => "PreparingRebalance",
            State::CompletingRebalance => "CompletingRebalance",
            State::Stable => "Stable",
            State::Dead => "Dead",
        }
    }
}

/// A parked JoinGroup or SyncGroup: who asked, at which version.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Parked {
    pub req: ReqId,
    pub version: i16,
}

#[derive(Debug, Clone)]
pub struct Member {
    pub member_id: String,
    pub instance_id: Option<String>,
    pub client_id: String,
    pub client_host: String,
    pub rebalance_timeout_ms: i32,
    pub session_timeout_ms: i32,
    pub protocol_type: String,
    /// Supported protocols in the member's order of preference, with their metadata.
    pub protocols: Vec<(String, Bytes)>,
    pub assignment: Bytes,
    pub awaiting_join: Option<Parked>,
    pub awaiting_sync: Option<Parked>,
    /// Still in its first join: session expiry removes it even while it waits.
    pub is_new: bool,
    /// The session deadline the member's last heartbeat set. Its session timer
    /// (`TimerKey::Heartbeat`) may be armed earlier, at `session_timer`: a heartbeat only moves
    /// this number, and the timer, when it fires, re-arms itself here (see `extend_session`).
    pub session_deadline: i64,
    /// When this member's session timer is armed to fire, as far as this member knows: `None`
    /// whenever that is not certain, which sends the next heartbeat down the exact path.
    pub session_timer: Option<i64>,
}

impl Member {
    pub(super) fn metadata_for(&self, protocol: &str) -> Bytes {
        self.protocols
            .iter()
            .find(|(n, _)| n == protocol)
            .map(|(_, m)| m.clone())
            .unwrap_or_default()
    }
    fn supports(&self, protocol: &str) -> bool {
        self.protocols.iter().any(|(n, _)| n == protocol)
    }
    /// Kafka's `ClassicGroupMember.matches`: same protocols, same metadata, same order.
    fn matches(&self, protocols: &[(String, Bytes)]) -> bool {
        self.protocols == protocols
    }
}

#[derive(Debug, Clone)]
pub struct ClassicGroup {
    pub group_id: String,
    pub state: State,
    pub previous_state: State,
    pub state_timestamp: i64,
    pub protocol_type: Option<String>,
    pub protocol_name: Option<String>,
    pub generation: i32,
    pub leader: Option<String>,
    /// Members in the order they were added (leader choice and descriptions follow it).
    pub members: IndexMap<String, Member>,
    /// Members told MEMBER_ID_REQUIRED that have not rejoined yet.
    pub pending_members: HashSet<String>,
    /// Members of the current generation that have not sent SyncGroup yet.
    pub pending_sync: HashSet<String>,
    /// Set when a member joins during the initial delay, to re-arm it.
    pub new_member_added: bool,
    /// The initial delay still left to wait, when the join phase is the initial one.
    pub initial_delay_remaining_ms: Option<i64>,
    /// Topics the members subscribe to (decoded from "consumer" protocol metadata), for offset
    /// expiry and OffsetDelete; None when unknown (another protocol type, or no members).
    pub subscribed_topics: Option<BTreeSet<String>>,
    /// The last GroupMetadata value written for this group: what a snapshot must contain (the
    /// in-memory state may be mid-rebalance, which records never describe).
    pub last_record: Option<GroupMetadataValue>,
}

impl ClassicGroup {
    fn new(group_id: &str, now: i64) -> Self {
        Self {
            group_id: group_id.to_string(),
            state: State::Empty,
            previous_state: State::Empty,
            state_timestamp: now,
            protocol_type: None,
            protocol_name: None,
            generation: 0,
            leader: None,
            members: IndexMap::new(),
            pending_members: HashSet::new(),
            pending_sync: HashSet::new(),
            new_member_added: false,
            initial_delay_remaining_ms: None,
            subscribed_topics: None,
            last_record: None,
        }
    }

    /// An empty group with no protocol (a standalone committer's, or a brand-new one).
    pub fn empty(group_id: &str, now: i64) -> Self {
        Self::new(group_id, now)
    }

    pub fn validate_member_pub(
        &self,
        member_id: &str,
        instance_id: Option<&str>,
    ) -> Result<(), i16> {
        self.validate_member(member_id, instance_id)
    }

    fn transition(&mut self, to: State, now: i64) {
        self.previous_state = self.state;
        self.state = to;
        self.state_timestamp = now;
    }

    fn static_member(&self, instance_id: &str) -> Option<&str> {
        self.members
            .values()
            .find(|m| m.instance_id.as_deref() == Some(instance_id))
            .map(|m| m.member_id.as_str())
    }

    /// `ClassicGroup.validateMember`: a dynamic member must exist; a static one must be the
    /// current holder of its instance id.
    fn validate_member(&self, member_id: &str, instance_id: Option<&str>) -> Result<(), i16> {
        match instance_id {
            None => {
                if self.members.contains_key(member_id) {
                    Ok(())
                } else {
                    Err(err(ResponseError::UnknownMemberId))
                }
            }
            Some(iid) => match self.static_member(iid) {
                None => Err(err(ResponseError::UnknownMemberId)),
                Some(holder) if holder != member_id => Err(err(ResponseError::FencedInstanceId)),
                Some(_) => Ok(()),
            },
        }
    }

    fn rebalance_timeout_ms(&self) -> i64 {
        self.members
            .values()
            .map(|m| m.rebalance_timeout_ms as i64)
            .max()
            .unwrap_or(0)
    }

    fn awaiting_join_count(&self) -> usize {
        self.members
            .values()
            .filter(|m| m.awaiting_join.is_some())
            .count()
    }

    fn has_all_members_joined(&self) -> bool {
        self.awaiting_join_count() == self.members.len() && self.pending_members.is_empty()
    }

    fn can_rebalance(&self) -> bool {
        matches!(
            self.state,
            State::Stable | State::CompletingRebalance | State::Empty
        )
    }

    /// Protocols every member supports, in the first member's order of preference.
    fn candidate_protocols(&self) -> Vec<String> {
        let Some(first) = self.members.values().next() else {
            return Vec::new();
        };
        first
            .protocols
            .iter()
            .map(|(n, _)| n.clone())
            .filter(|p| self.members.values().all(|m| m.supports(p)))
            .collect()
    }

    /// `ClassicGroup.supportsProtocols`: could a member with these protocols join?
    fn supports_protocols(&self, protocol_type: &str, protocols: &[(String, Bytes)]) -> bool {
        if self.members.is_empty() {
            return !protocol_type.is_empty() && !protocols.is_empty();
        }
        self.protocol_type.as_deref() == Some(protocol_type)
            && protocols
                .iter()
                .any(|(p, _)| self.members.values().all(|m| m.supports(p)))
    }

    /// `ClassicGroup.selectProtocol`: each member votes for its first supported candidate; most
    /// votes wins (ties go to the candidate listed first).
    pub(super) fn select_protocol(&self) -> Option<String> {
        let candidates = self.candidate_protocols();
        if candidates.is_empty() {
            return None;
        }
        let mut votes = vec![0usize; candidates.len()];
        for m in self.members.values() {
            if let Some(i) = m
                .protocols
                .iter()
                .find_map(|(n, _)| candidates.iter().position(|c| c == n))
            {
                votes[i] += 1;
            }
        }
        let best = votes
            .iter()
            .enumerate()
            .max_by(|a, b| a.1.cmp(b.1).then(b.0.cmp(&a.0)))
            .map(|(i, _)| i)?;
        Some(candidates[best].clone())
    }

    pub(super) fn compute_subscribed_topics(&self) -> Option<BTreeSet<String>> {
        if self.protocol_type.as_deref() != Some("consumer") {
            return None;
        }
        if self.members.is_empty() {
            return Some(BTreeSet::new());
        }
        let protocol = self.protocol_name.as_deref()?;
        let mut topics = BTreeSet::new();
        for m in self.members.values() {
            topics.extend(decode_subscription_topics(&m.metadata_for(protocol))?);
        }
        Some(topics)
    }

    /// What the GroupMetadata record for the current state says (`newGroupMetadataRecord`, v3).
    pub fn to_record_value(&self) -> GroupMetadataValue {
        let protocol = self.protocol_name.clone();
        GroupMetadataValue {
            protocol_type: self.protocol_type.clone().unwrap_or_default(),
            generation: self.generation,
            protocol: protocol.clone(),
            leader: self.leader.clone(),
            current_state_timestamp: self.state_timestamp,
            members: self
                .members
                .values()
                .map(|m| GroupMetadataMember {
                    member_id: m.member_id.clone(),
                    group_instance_id: m.instance_id.clone(),
                    client_id: m.client_id.clone(),
                    client_host: m.client_host.clone(),
                    rebalance_timeout: m.rebalance_timeout_ms,
                    session_timeout: m.session_timeout_ms,
                    subscription: protocol
                        .as_deref()
                        .map(|p| m.metadata_for(p).to_vec())
                        .unwrap_or_default(),
                    assignment: m.assignment.to_vec(),
                })
                .collect(),
        }
    }
}

/// Topic names of a `ConsumerProtocolSubscription` (int16 version, then the struct; newer
/// versions are read by their known prefix, as Kafka's parser does). None if it does not parse.
pub fn decode_subscription_topics(metadata: &[u8]) -> Option<Vec<String>> {
    let sub = wire::consumer_protocol::decode_subscription(metadata).ok()?;
    Some(sub.topics.iter().map(|t| t.to_string()).collect())
}

fn s(v: &str) -> StrBytes {
    StrBytes::from_string(v.to_string())
}

pub(super) fn join_error(code: i16, member_id: &str, version: i16) -> JoinGroupResponse {
    JoinGroupResponse::default()
        .with_error_code(code)
        .with_generation_id(-1)
        .with_member_id(s(member_id))
        .with_leader(s(""))
        .with_protocol_type(None)
        .with_protocol_name(if version >= 7 { None } else { Some(s("")) })
}

pub(super) fn reply_join(out: &mut Output, id: ReqId, resp: JoinGroupResponse) {
    out.replies.push((id, GroupResponse::Join(resp)));
}

pub(super) fn reply_sync(
    out: &mut Output,
    id: ReqId,
    code: i16,
    assignment: Bytes,
    group: Option<&ClassicGroup>,
) {
    let mut r = SyncGroupResponse::default()
        .with_error_code(code)
        .with_assignment(assignment);
    if let Some(g) = group {
        r.protocol_type = g.protocol_type.as_deref().map(s);
        r.protocol_name = g.protocol_name.as_deref().map(s);
    }
    out.replies.push((id, GroupResponse::Sync(r)));
}

pub(super) fn schedule_heartbeat(
    c: &mut Coordinator,
    group: &str,
    member: &str,
    timeout_ms: i64,
    now: i64,
) {
    let deadline = now + timeout_ms;
    c.timers.schedule(
        TimerKey::Heartbeat {
            group: group.into(),
            member: member.into(),
        },
        deadline,
    );
    if let Some(m) = member_mut(c, group, member) {
        m.session_deadline = deadline;
        m.session_timer = Some(deadline);
    }
}

fn cancel_heartbeat(c: &mut Coordinator, group: &str, member: &str) {
    c.timers.cancel(&TimerKey::Heartbeat {
        group: group.into(),
        member: member.into(),
    });
    if let Some(m) = member_mut(c, group, member) {
        m.session_timer = None;
    }
}

fn member_mut<'a>(c: &'a mut Coordinator, group: &str, member: &str) -> Option<&'a mut Member> {
    c.groups.get_mut(group)?.members.get_mut(member)
}

/// A sign of life: the member's session now ends at `now + timeout_ms`. The hot path of every
/// heartbeat, so it touches no timer when it can: if the member's session timer is armed no
/// later than the new deadline, only the member's `session_deadline` moves, and the timer, when
/// it fires, re-arms itself there (`on_session_expired`). Sessions end exactly when they did
/// with a timer moved on every heartbeat; a member costs at most one extra wake-up per session
/// timeout instead of a timer removal and insertion (with owned keys) per heartbeat.
fn extend_session(c: &mut Coordinator, group: &str, member: &str, timeout_ms: i64, now: i64) {
    let deadline = now + timeout_ms;
    if let Some(m) = member_mut(c, group, member) {
        if m.session_timer.is_some_and(|t| t <= deadline) {
            m.session_deadline = deadline;
            return;
        }
    }
    schedule_heartbeat(c, group, member, timeout_ms, now);
}

/// The JoinGroup response a member gets when a join phase completes (or when it simply
/// re-sends its join for the current generation).
fn join_response(g: &ClassicGroup, member_id: &str, version: i16) -> JoinGroupResponse {
    let is_leader = g.leader.as_deref() == Some(member_id);
    let protocol = g.protocol_name.clone();
    let members = if is_leader {
        g.members
            .values()
            .map(|m| {
                JoinGroupResponseMember::default()
                    .with_member_id(s(&m.member_id))
                    .with_group_instance_id(m.instance_id.as_deref().map(s))
                    .with_metadata(
                        protocol
                            .as_deref()
                            .map(|p| m.metadata_for(p))
                            .unwrap_or_default(),
                    )
            })
            .collect()
    } else {
        Vec::new()
    };
    JoinGroupResponse::default()
        .with_generation_id(g.generation)
        .with_protocol_type(g.protocol_type.as_deref().map(s))
        .with_protocol_name(match (&protocol, version >= 7) {
            (Some(p), _) => Some(s(p)),
            (None, true) => None,
            (None, false) => Some(s("")),
        })
        .with_leader(s(g.leader.as_deref().unwrap_or("")))
        .with_member_id(s(member_id))
        .with_members(members)
}

fn protocols_of(r: &JoinGroupRequest) -> Vec<(String, Bytes)> {
    r.protocols
        .iter()
        .map(|p| (p.name.to_string(), p.metadata.clone()))
        .collect()
}

/// JoinGroup (`GCS.joinGroup` → `GMM.classicGroupJoin`).
pub fn join(
    c: &mut Coordinator,
    id: ReqId,
    ctx: &RequestContext,
    r: JoinGroupRequest,
    now: i64,
    out: &mut Output,
) {
    let v = ctx.api_version;
    let group_id = r.group_id.0.to_string();
    let member_id = r.member_id.to_string();
    // §5.5.1: validation before anything.
    if group_id.is_empty() {
        return reply_join(
            out,
            id,
            join_error(err(ResponseError::InvalidGroupId), &member_id, v),
        );
    }
    if r.session_timeout_ms < c.config.min_session_timeout_ms
        || r.session_timeout_ms > c.config.max_session_timeout_ms
    {
        return reply_join(
            out,
            id,
            join_error(err(ResponseError::InvalidSessionTimeout), &member_id, v),
        );
    }
    if let Some(cg) = c.consumer_groups.get(&group_id) {
        if !cg.members.is_empty() {
            // A classic member joins a live consumer group as one of its members (online
            // migration, `GMM.classicGroupJoin` → `classicGroupJoinToConsumerGroup`).
            return super::migration::join(c, id, ctx, r, now, out);
        }
        // `maybeDeleteEmptyConsumerGroup`: an empty consumer group gives way to a classic one.
        if member_id.is_empty() {
            super::consumer::delete_empty(c, &group_id, out);
        }
    }
    let protocols = protocols_of(&r);
    let protocol_type = r.protocol_type.to_string();
    let instance_id = r.group_instance_id.as_ref().map(|i| i.to_string());
    if !c.groups.contains_key(&group_id) {
        if !member_id.is_empty() {
            return reply_join(
                out,
                id,
                join_error(err(ResponseError::UnknownMemberId), &member_id, v),
            );
        }
        // A group a JoinGroup creates is written at once, empty, with generation 0, whatever
        // the join's outcome (`classicGroupJoinToClassicGroup`: `newEmptyGroupMetadataRecord`
        // when the join itself wrote nothing, which is every join that creates a group, since
        // the first rebalance always waits for its timer).
        c.groups
            .insert(group_id.clone(), ClassicGroup::new(&group_id, now));
        let value = c.groups[&group_id].to_record_value();
        c.apply(
            Record {
                key: RecordKey::GroupMetadata {
                    group: group_id.clone(),
                },
                value: Some(RecordValue::GroupMetadata(value)),
            },
            out,
        );
    }
    let g = c.groups.get(&group_id).expect("present");
    if g.state == State::Dead {
        return reply_join(
            out,
            id,
            join_error(err(ResponseError::CoordinatorNotAvailable), &member_id, v),
        );
    }
    if !g.supports_protocols(&protocol_type, &protocols) {
        let code = err(ResponseError::InconsistentGroupProtocol);
        return reply_join(out, id, join_error(code, "", v));
    }
    // Capacity (`acceptJoiningMember`).
    let is_member = g.members.contains_key(&member_id);
    let accept = match g.state {
        State::Empty | State::Dead => true,
        State::PreparingRebalance => {
            (is_member && g.members[&member_id].awaiting_join.is_some())
                || (g.awaiting_join_count() as i64) < c.config.max_size as i64
        }
        State::CompletingRebalance | State::Stable => {
            is_member || (g.members.len() as i64) < c.config.max_size as i64
        }
    };
    if !accept {
        if is_member {
            remove_member(c, &group_id, &member_id, now, out, "exceeds group.max.size");
        }
        return reply_join(
            out,
            id,
            join_error(err(ResponseError::GroupMaxSizeReached), &member_id, v),
        );
    }
    let rebalance_timeout_ms = if v == 0 {
        r.session_timeout_ms
    } else {
        r.rebalance_timeout_ms
    };
    let member = Member {
        member_id: member_id.clone(),
        instance_id: instance_id.clone(),
        client_id: ctx.client_id.clone(),
        client_host: ctx.client_host.clone(),
        rebalance_timeout_ms,
        session_timeout_ms: r.session_timeout_ms,
        protocol_type,
        protocols,
        assignment: Bytes::new(),
        awaiting_join: Some(Parked {
            req: id,
            version: v,
        }),
        awaiting_sync: None,
        is_new: true,
        session_deadline: 0,
        session_timer: None,
    };
    if member_id.is_empty() {
        match &instance_id {
            Some(iid) => join_new_static_member(c, &group_id, iid, member, now, out),
            None => join_new_dynamic_member(c, &group_id, member, now, out),
        }
    } else {
        join_existing_member(c, &group_id, member, now, out);
    }
}

fn new_member_id(c: &mut Coordinator, prefix: &str) -> String {
    let id = match c.member_ids.as_mut() {
        Some(ids) => ids.next_uuid(),
        None => uuid::Uuid::new_v4(),
    };
    format!("{prefix}-{id}")
}

/// §5.5.2–3: a dynamic member gets an id; from v4 it must come back with it (MEMBER_ID_REQUIRED).
fn join_new_dynamic_member(
    c: &mut Coordinator,
    group_id: &str,
    mut member: Member,
    now: i64,
    out: &mut Output,
) {
    let parked = member.awaiting_join.expect("join parks");
    member.member_id = new_member_id(c, &member.client_id);
    if parked.version >= 4 {
        let g = c.groups.get_mut(group_id).expect("present");
        g.pending_members.insert(member.member_id.clone());
        c.timers.schedule(
            TimerKey::PendingMember {
                group: group_id.into(),
                member: member.member_id.clone(),
            },
            now + member.session_timeout_ms as i64,
        );
        return reply_join(
            out,
            parked.req,
            join_error(
                err(ResponseError::MemberIdRequired),
                &member.member_id,
                parked.version,
            ),
        );
    }
    add_member_and_rebalance(c, group_id, member, now, out);
}

/// §5.5.4: a static member joining with an empty member id; replaces the instance's old member.
fn join_new_static_member(
    c: &mut Coordinator,
    group_id: &str,
    iid: &str,
    mut member: Member,
    now: i64,
    out: &mut Output,
) {
    member.member_id = new_member_id(c, iid);
    let existing = c.groups[group_id].static_member(iid).map(str::to_string);
    match existing {
        None => add_member_and_rebalance(c, group_id, member, now, out),
        Some(old_id) => replace_static_member(c, group_id, &old_id, member, now, out),
    }
}

fn join_existing_member(
    c: &mut Coordinator,
    group_id: &str,
    member: Member,
    now: i64,
    out: &mut Output,
) {
    let parked = member.awaiting_join.expect("join parks");
    let g = c.groups.get_mut(group_id).expect("present");
    if g.pending_members.remove(&member.member_id) {
        // The second join of a v4+ dynamic member.
        c.timers.cancel(&TimerKey::PendingMember {
            group: group_id.into(),
            member: member.member_id.clone(),
        });
        return add_member_and_rebalance(c, group_id, member, now, out);
    }
    if let Err(code) = g.validate_member(&member.member_id, member.instance_id.as_deref()) {
        return reply_join(
            out,
            parked.req,
            join_error(code, &member.member_id, parked.version),
        );
    }
    let existing = &g.members[&member.member_id];
    match g.state {
        State::PreparingRebalance => update_member_and_rebalance(c, group_id, member, now, out),
        State::CompletingRebalance => {
            if existing.matches(&member.protocols) {
                // A lost response: answer with the generation it already belongs to.
                let resp = join_response(g, &member.member_id, parked.version);
                reply_join(out, parked.req, resp);
            } else {
                update_member_and_rebalance(c, group_id, member, now, out);
            }
        }
        State::Stable => {
            let is_leader = g.leader.as_deref() == Some(member.member_id.as_str());
            if is_leader || !existing.matches(&member.protocols) {
                update_member_and_rebalance(c, group_id, member, now, out);
            } else {
                // A follower re-joining with the same protocols: no rebalance.
                let resp = join_response(g, &member.member_id, parked.version);
                schedule_heartbeat(
                    c,
                    group_id,
                    &member.member_id,
                    member.session_timeout_ms as i64,
                    now,
                );
                reply_join(out, parked.req, resp);
            }
        }
        State::Empty | State::Dead => reply_join(
            out,
            parked.req,
            join_error(
                err(ResponseError::UnknownMemberId),
                &member.member_id,
                parked.version,
            ),
        ),
    }
}

fn add_member_and_rebalance(
    c: &mut Coordinator,
    group_id: &str,
    member: Member,
    now: i64,
    out: &mut Output,
) {
    let g = c.groups.get_mut(group_id).expect("present");
    if g.members.is_empty() {
        g.protocol_type = Some(member.protocol_type.clone());
    }
    if g.leader.is_none() {
        g.leader = Some(member.member_id.clone());
    }
    if g.state == State::PreparingRebalance && g.previous_state == State::Empty {
        g.new_member_added = true;
    }
    let mid = member.member_id.clone();
    g.members.insert(mid.clone(), member);
    // A new member has the new-member join timeout until its first join completes.
    schedule_heartbeat(c, group_id, &mid, NEW_MEMBER_JOIN_TIMEOUT_MS, now);
    prepare_rebalance_or_complete_join(c, group_id, now, out);
}

fn update_member_and_rebalance(
    c: &mut Coordinator,
    group_id: &str,
    member: Member,
    now: i64,
    out: &mut Output,
) {
    let g = c.groups.get_mut(group_id).expect("present");
    let existing = g.members.get_mut(&member.member_id).expect("validated");
    if let Some(old) = existing
        .awaiting_join
        .replace(member.awaiting_join.expect("join parks"))
    {
        // A second JoinGroup while the first still waits: the old one is superseded.
        reply_join(
            out,
            old.req,
            join_error(
                err(ResponseError::UnknownMemberId),
                &member.member_id,
                old.version,
            ),
        );
    }
    existing.protocols = member.protocols;
    existing.rebalance_timeout_ms = member.rebalance_timeout_ms;
    existing.session_timeout_ms = member.session_timeout_ms;
    existing.client_id = member.client_id;
    existing.client_host = member.client_host;
    prepare_rebalance_or_complete_join(c, group_id, now, out);
}

/// §5.5.4: the instance's old member id is fenced; the new one takes its place. In a Stable group
/// whose selected protocol would not change, that is all: the record is re-written and the member
/// gets the current generation, without a rebalance of the others.
fn replace_static_member(
    c: &mut Coordinator,
    group_id: &str,
    old_id: &str,
    new: Member,
    now: i64,
    out: &mut Output,
) {
    let parked = new.awaiting_join.expect("join parks");
    let g = c.groups.get_mut(group_id).expect("present");
    let Some(mut old) = g.members.shift_remove(old_id) else {
        return;
    };
    // The old incarnation's parked requests learn they are fenced.
    if let Some(p) = old.awaiting_join.take() {
        reply_join(
            out,
            p.req,
            join_error(err(ResponseError::FencedInstanceId), old_id, p.version),
        );
    }
    if let Some(p) = old.awaiting_sync.take() {
        reply_sync(
            out,
            p.req,
            err(ResponseError::FencedInstanceId),
            Bytes::new(),
            None,
        );
    }
    let selected_before = g.protocol_name.clone();
    let old_protocols = old.protocols.clone();
    let mut replaced = old.clone();
    replaced.member_id = new.member_id.clone();
    replaced.protocols = new.protocols.clone();
    replaced.rebalance_timeout_ms = new.rebalance_timeout_ms;
    replaced.session_timeout_ms = new.session_timeout_ms;
    replaced.client_id = new.client_id.clone();
    replaced.client_host = new.client_host.clone();
    replaced.is_new = false;
    // Keep the member's position (insertion order decides leadership and descriptions).
    let pos = g.members.len();
    g.members.insert(replaced.member_id.clone(), replaced);
    let _ = pos;
    if g.leader.as_deref() == Some(old_id) {
        g.leader = Some(new.member_id.clone());
    }
    if g.pending_sync.remove(old_id) {
        g.pending_sync.insert(new.member_id.clone());
    }
    cancel_heartbeat(c, group_id, old_id);
    schedule_heartbeat(
        c,
        group_id,
        &new.member_id,
        new.session_timeout_ms as i64,
        now,
    );
    let g = c.groups.get_mut(group_id).expect("present");
    match g.state {
        State::Stable => {
            let selected_after = g.select_protocol();
            if selected_after.is_some() && selected_after == selected_before {
                let record = Record {
                    key: RecordKey::GroupMetadata {
                        group: group_id.into(),
                    },
                    value: Some(RecordValue::GroupMetadata(g.to_record_value())),
                };
                let mut resp = join_response(g, &new.member_id, parked.version);
                let is_leader = g.leader.as_deref() == Some(new.member_id.as_str());
                if is_leader && parked.version < 9 {
                    // Before v9 a leader cannot be told to skip assignment; send the plain
                    // response (no member list) so it does not reassign (`GMM` static rejoin).
                    resp.members.clear();
                }
                resp.skip_assignment = is_leader && parked.version >= 9;
                c.apply(record, out);
                reply_join(out, parked.req, resp);
            } else {
                // The protocol would change: restore the old protocols on the replaced member and
                // go through a normal rebalance with the new ones.
                let m = g.members.get_mut(&new.member_id).expect("inserted");
                m.protocols = old_protocols;
                let mut joining = new;
                joining.awaiting_join = Some(parked);
                update_member_and_rebalance(c, group_id, joining, now, out);
            }
        }
        State::CompletingRebalance | State::PreparingRebalance => {
            let mut joining = new;
            joining.awaiting_join = Some(parked);
            update_member_and_rebalance(c, group_id, joining, now, out);
        }
        State::Empty | State::Dead => reply_join(
            out,
            parked.req,
            join_error(
                err(ResponseError::UnknownMemberId),
                &new.member_id,
                parked.version,
            ),
        ),
    }
}

/// `maybePrepareRebalanceOrCompleteJoin`.
fn prepare_rebalance_or_complete_join(
    c: &mut Coordinator,
    group_id: &str,
    now: i64,
    out: &mut Output,
) {
    if c.groups[group_id].can_rebalance() {
        prepare_rebalance(c, group_id, now, out);
    } else {
        maybe_complete_join(c, group_id, now, out);
    }
}

/// §5.5.5 (`prepareRebalance`).
pub(super) fn prepare_rebalance(c: &mut Coordinator, group_id: &str, now: i64, out: &mut Output) {
    let cfg_delay = c.config.initial_rebalance_delay_ms as i64;
    let g = c.groups.get_mut(group_id).expect("present");
    if g.state == State::CompletingRebalance {
        // Parked syncs learn the generation they waited for is gone.
        for m in g.members.values_mut() {
            m.assignment = Bytes::new();
            if let Some(p) = m.awaiting_sync.take() {
                reply_sync(
                    out,
                    p.req,
                    err(ResponseError::RebalanceInProgress),
                    Bytes::new(),
                    None,
                );
            }
        }
    }
    g.pending_sync.clear();
    c.timers.cancel(&TimerKey::Sync {
        group: group_id.into(),
    });
    let g = c.groups.get_mut(group_id).expect("present");
    let initial = g.state == State::Empty;
    let rebalance_timeout = g.rebalance_timeout_ms();
    g.transition(State::PreparingRebalance, now);
    if initial {
        g.new_member_added = false;
        g.initial_delay_remaining_ms = Some((rebalance_timeout - cfg_delay).max(0));
        c.timers.schedule(
            TimerKey::Join {
                group: group_id.into(),
            },
            now + cfg_delay,
        );
    } else {
        g.initial_delay_remaining_ms = None;
        c.timers.schedule(
            TimerKey::Join {
                group: group_id.into(),
            },
            now + rebalance_timeout,
        );
        maybe_complete_join(c, group_id, now, out);
    }
}

/// `maybeCompleteJoinPhase`: finish early when everyone is in, except the initial phase.
fn maybe_complete_join(c: &mut Coordinator, group_id: &str, now: i64, out: &mut Output) {
    let g = &c.groups[group_id];
    if g.state == State::PreparingRebalance
        && g.has_all_members_joined()
        && g.previous_state != State::Empty
    {
        complete_join(c, group_id, now, out);
    }
}

/// The join deadline fired: the initial delay (maybe re-armed) or the rebalance timeout.
pub fn on_join_deadline(c: &mut Coordinator, group_id: &str, now: i64, out: &mut Output) {
    let cfg_delay = c.config.initial_rebalance_delay_ms as i64;
    let Some(g) = c.groups.get_mut(group_id) else {
        return;
    };
    if g.state != State::PreparingRebalance {
        return;
    }
    if let Some(remaining) = g.initial_delay_remaining_ms {
        // `tryCompleteInitialRebalanceElseSchedule`: members still arriving re-arm the delay.
        if g.new_member_added && remaining != 0 {
            g.new_member_added = false;
            let delay = cfg_delay.min(remaining);
            g.initial_delay_remaining_ms = Some((remaining - cfg_delay).max(0));
            c.timers.schedule(
                TimerKey::Join {
                    group: group_id.into(),
                },
                now + delay,
            );
            return;
        }
    }
    complete_join(c, group_id, now, out);
}

/// §5.5.6 (`completeClassicGroupJoin`).
fn complete_join(c: &mut Coordinator, group_id: &str, now: i64, out: &mut Output) {
    c.timers.cancel(&TimerKey::Join {
        group: group_id.into(),
    });
    let g = c.groups.get_mut(group_id).expect("present");
    g.initial_delay_remaining_ms = None;
    // Dynamic members that did not rejoin are removed; static ones stay (§5.5.4).
    let missing: Vec<String> = g
        .members
        .values()
        .filter(|m| m.awaiting_join.is_none() && m.instance_id.is_none())
        .map(|m| m.member_id.clone())
        .collect();
    for mid in &missing {
        g.members.shift_remove(mid);
        c.timers.cancel(&TimerKey::Heartbeat {
            group: group_id.into(),
            member: mid.clone(),
        });
    }
    let g = c.groups.get_mut(group_id).expect("present");
    if g.leader
        .as_ref()
        .is_some_and(|l| !g.members.contains_key(l))
    {
        g.leader = None;
    }
    // `maybeElectNewJoinedLeader`: keep a leader that rejoined, else any member that did.
    let leader_joined = g
        .leader
        .as_ref()
        .is_some_and(|l| g.members[l].awaiting_join.is_some());
    if !leader_joined {
        g.leader = g
            .members
            .values()
            .find(|m| m.awaiting_join.is_some())
            .map(|m| m.member_id.clone());
    }
    if g.leader.is_none() && !g.members.is_empty() {
        // Nobody rejoined: wait another rebalance timeout for session expiry to clean up.
        let t = g.rebalance_timeout_ms();
        c.timers.schedule(
            TimerKey::Join {
                group: group_id.into(),
            },
            now + t,
        );
        return;
    }
    // `initNextGeneration`.
    g.generation += 1;
    if g.members.is_empty() {
        // The protocol type stays (Kafka sets it with the first member and never clears it);
        // an empty "consumer" group subscribes to nothing.
        g.protocol_name = None;
        g.subscribed_topics = (g.protocol_type.as_deref() == Some("consumer")).then(BTreeSet::new);
        g.transition(State::Empty, now);
        let record = Record {
            key: RecordKey::GroupMetadata {
                group: group_id.into(),
            },
            value: Some(RecordValue::GroupMetadata(g.to_record_value())),
        };
        c.apply(record, out);
        return;
    }
    c.rebalances += 1;
    let g = c.groups.get_mut(group_id).expect("present");
    g.protocol_name = g.select_protocol();
    g.subscribed_topics = g.compute_subscribed_topics();
    g.transition(State::CompletingRebalance, now);
    let mut replies = Vec::new();
    let mut sessions = Vec::new();
    for mid in g.members.keys().cloned().collect::<Vec<_>>() {
        let resp_for = {
            let m = &g.members[&mid];
            m.awaiting_join
                .map(|p| (p, join_response(g, &mid, p.version)))
        };
        let m = g.members.get_mut(&mid).expect("present");
        if let Some((p, resp)) = resp_for {
            replies.push((p.req, resp));
        }
        m.awaiting_join = None;
        m.is_new = false;
        sessions.push((mid.clone(), m.session_timeout_ms as i64));
        g.pending_sync.insert(mid);
    }
    let sync_timeout = g.rebalance_timeout_ms();
    for (mid, t) in sessions {
        schedule_heartbeat(c, group_id, &mid, t, now);
    }
    c.timers.schedule(
        TimerKey::Sync {
            group: group_id.into(),
        },
        now + sync_timeout,
    );
    for (req, resp) in replies {
        reply_join(out, req, resp);
    }
}

/// SyncGroup (§5.5.7, `GMM.classicGroupSync`).
pub fn sync(
    c: &mut Coordinator,
    id: ReqId,
    ctx: &RequestContext,
    r: SyncGroupRequest,
    now: i64,
    out: &mut Output,
) {
    let group_id = r.group_id.0.to_string();
    let member_id = r.member_id.to_string();
    if group_id.is_empty() {
        return reply_sync(
            out,
            id,
            err(ResponseError::InvalidGroupId),
            Bytes::new(),
            None,
        );
    }
    if c.consumer_groups.contains_key(&group_id) {
        // `GMM.classicGroupSync` → `classicGroupSyncToConsumerGroup`.
        return super::migration::sync(c, id, ctx, r, now, out);
    }
    let Some(g) = c.groups.get_mut(&group_id) else {
        return reply_sync(
            out,
            id,
            err(ResponseError::UnknownMemberId),
            Bytes::new(),
            None,
        );
    };
    if g.state == State::Dead {
        return reply_sync(
            out,
            id,
            err(ResponseError::CoordinatorNotAvailable),
            Bytes::new(),
            None,
        );
    }
    if let Err(code) = g.validate_member(&member_id, r.group_instance_id.as_deref()) {
        return reply_sync(out, id, code, Bytes::new(), None);
    }
    if r.generation_id != g.generation {
        return reply_sync(
            out,
            id,
            err(ResponseError::IllegalGeneration),
            Bytes::new(),
            None,
        );
    }
    let type_mismatch = r
        .protocol_type
        .as_ref()
        .is_some_and(|t| Some(t.as_str()) != g.protocol_type.as_deref());
    let name_mismatch = r
        .protocol_name
        .as_ref()
        .is_some_and(|n| Some(n.as_str()) != g.protocol_name.as_deref());
    if type_mismatch || name_mismatch {
        return reply_sync(
            out,
            id,
            err(ResponseError::InconsistentGroupProtocol),
            Bytes::new(),
            None,
        );
    }
    g.pending_sync.remove(&member_id);
    match g.state {
        State::Empty => reply_sync(
            out,
            id,
            err(ResponseError::UnknownMemberId),
            Bytes::new(),
            None,
        ),
        State::PreparingRebalance => reply_sync(
            out,
            id,
            err(ResponseError::RebalanceInProgress),
            Bytes::new(),
            None,
        ),
        State::Stable => {
            let assignment = g.members[&member_id].assignment.clone();
            let g = &c.groups[&group_id];
            reply_sync(out, id, 0, assignment, Some(g));
            if g.pending_sync.is_empty() {
                c.timers.cancel(&TimerKey::Sync { group: group_id });
            }
        }
        State::CompletingRebalance => {
            g.members
                .get_mut(&member_id)
                .expect("validated")
                .awaiting_sync = Some(Parked {
                req: id,
                version: ctx.api_version,
            });
            if g.leader.as_deref() != Some(member_id.as_str()) {
                return; // followers wait for the leader's assignment
            }
            for m in g.members.values_mut() {
                m.assignment = r
                    .assignments
                    .iter()
                    .find(|a| a.member_id.as_str() == m.member_id)
                    .map(|a| a.assignment.clone())
                    .unwrap_or_default();
            }
            g.transition(State::Stable, now);
            let record = Record {
                key: RecordKey::GroupMetadata {
                    group: group_id.clone(),
                },
                value: Some(RecordValue::GroupMetadata(g.to_record_value())),
            };
            let mut replies = Vec::new();
            for m in g.members.values_mut() {
                if let Some(p) = m.awaiting_sync.take() {
                    replies.push((p.req, m.assignment.clone()));
                }
            }
            let done = g.pending_sync.is_empty();
            c.apply(record, out);
            let g = &c.groups[&group_id];
            for (req, a) in replies {
                reply_sync(out, req, 0, a, Some(g));
            }
            if done {
                c.timers.cancel(&TimerKey::Sync { group: group_id });
            }
        }
        State::Dead => unreachable!("checked above"),
    }
}

/// The sync deadline fired: members that never synced are removed and a new rebalance starts
/// (`expirePendingSync`).
pub fn on_sync_deadline(c: &mut Coordinator, group_id: &str, now: i64, out: &mut Output) {
    let Some(g) = c.groups.get_mut(group_id) else {
        return;
    };
    if !matches!(g.state, State::CompletingRebalance | State::Stable) || g.pending_sync.is_empty() {
        return;
    }
    let late: Vec<String> = g.pending_sync.drain().collect();
    for mid in late {
        let g = c.groups.get_mut(group_id).expect("present");
        if let Some(m) = g.members.shift_remove(&mid) {
            if let Some(p) = m.awaiting_sync {
                reply_sync(
                    out,
                    p.req,
                    err(ResponseError::UnknownMemberId),
                    Bytes::new(),
                    None,
                );
            }
            if g.leader.as_deref() == Some(mid.as_str()) {
                g.leader = g.members.keys().next().cloned();
            }
            cancel_heartbeat(c, group_id, &mid);
        }
    }
    prepare_rebalance(c, group_id, now, out);
}

/// Heartbeat (§5.5.8). Changes nothing durable, so it is answered at once.
pub fn heartbeat(
    c: &mut Coordinator,
    _ctx: &RequestContext,
    r: HeartbeatRequest,
    now: i64,
) -> HeartbeatResponse {
    let code = heartbeat_code(c, &r, now);
    HeartbeatResponse::default().with_error_code(code)
}

fn heartbeat_code(c: &mut Coordinator, r: &HeartbeatRequest, now: i64) -> i16 {
    let group_id = r.group_id.0.as_str();
    let member_id = r.member_id.as_str();
    if group_id.is_empty() {
        return err(ResponseError::InvalidGroupId);
    }
    // One lookup of the group and one of the member: this is every heartbeat's path.
    let Some(g) = c.groups.get_mut(group_id) else {
        if c.consumer_groups.contains_key(group_id) {
            // `GMM.classicGroupHeartbeat` → `classicGroupHeartbeatToConsumerGroup`.
            return super::migration::heartbeat(c, r, now);
        }
        return err(ResponseError::UnknownMemberId);
    };
    if g.state == State::Dead {
        return err(ResponseError::CoordinatorNotAvailable);
    }
    if let Err(code) = g.validate_member(member_id, r.group_instance_id.as_deref()) {
        return code;
    }
    if r.generation_id != g.generation {
        return err(ResponseError::IllegalGeneration);
    }
    let code = match g.state {
        State::Empty => return err(ResponseError::UnknownMemberId),
        State::Dead => return err(ResponseError::CoordinatorNotAvailable),
        State::PreparingRebalance => err(ResponseError::RebalanceInProgress),
        State::CompletingRebalance | State::Stable => 0,
    };
    // `extend_session`, with the member already in hand.
    let m = g.members.get_mut(member_id).expect("validated member");
    let timeout = m.session_timeout_ms as i64;
    let deadline = now + timeout;
    if m.session_timer.is_some_and(|t| t <= deadline) {
        m.session_deadline = deadline;
    } else {
        schedule_heartbeat(c, group_id, member_id, timeout, now);
    }
    code
}

/// A valid member's commit counts as a sign of life (§5.5.8).
pub fn touch_member(c: &mut Coordinator, group_id: &str, member_id: &str, now: i64) {
    let Some(g) = c.groups.get(group_id) else {
        return;
    };
    if !matches!(g.state, State::Stable | State::PreparingRebalance) {
        return;
    }
    if let Some(m) = g.members.get(member_id) {
        let t = m.session_timeout_ms as i64;
        extend_session(c, group_id, member_id, t, now);
    }
}

/// Session expiry (§5.5.9).
pub fn on_session_expired(
    c: &mut Coordinator,
    group_id: &str,
    member_id: &str,
    now: i64,
    out: &mut Output,
) {
    let Some(g) = c.groups.get_mut(group_id) else {
        return;
    };
    if g.state == State::Dead {
        return;
    }
    let Some(m) = g.members.get_mut(member_id) else {
        return;
    };
    // This timer has fired (the tick took it). If heartbeats moved the session on since it was
    // armed (`extend_session`), the session is not over: arm the timer at the real deadline.
    m.session_timer = None;
    if m.session_deadline > now {
        let deadline = m.session_deadline;
        m.session_timer = Some(deadline);
        c.timers.schedule(
            TimerKey::Heartbeat {
                group: group_id.into(),
                member: member_id.into(),
            },
            deadline,
        );
        return;
    }
    let m = &c.groups[group_id].members[member_id];
    // `hasSatisfiedHeartbeat`: a member parked in join or sync is waiting on us, not late —
    // unless it is new (still in its first join, bounded by the new-member timeout).
    if !m.is_new && (m.awaiting_join.is_some() || m.awaiting_sync.is_some()) {
        return;
    }
    remove_member(c, group_id, member_id, now, out, "session expired");
}

pub fn on_pending_member_expired(
    c: &mut Coordinator,
    group_id: &str,
    member_id: &str,
    now: i64,
    out: &mut Output,
) {
    let Some(g) = c.groups.get_mut(group_id) else {
        return;
    };
    if g.pending_members.remove(member_id) && g.state == State::PreparingRebalance {
        maybe_complete_join(c, group_id, now, out);
    }
}

/// `removeMemberAndUpdateClassicGroup`.
fn remove_member(
    c: &mut Coordinator,
    group_id: &str,
    member_id: &str,
    now: i64,
    out: &mut Output,
    why: &str,
) {
    if !c.groups[group_id].members.contains_key(member_id) {
        return;
    }
    tracing::debug!(
        group = group_id,
        member = member_id,
        reason = why,
        "removing member"
    );
    remove_member_quietly(c, group_id, member_id, out);
    after_members_left(c, group_id, now, out);
}

/// What a departure does to the group: a settled group rebalances; one in its join phase may
/// now have everyone it waits for.
fn after_members_left(c: &mut Coordinator, group_id: &str, now: i64, out: &mut Output) {
    match c.groups[group_id].state {
        State::Stable | State::CompletingRebalance => prepare_rebalance(c, group_id, now, out),
        State::PreparingRebalance => maybe_complete_join(c, group_id, now, out),
        State::Empty | State::Dead => {}
    }
}

/// LeaveGroup (§5.5.10, `GMM.classicGroupLeave`).
pub fn leave(
    c: &mut Coordinator,
    id: ReqId,
    ctx: &RequestContext,
    r: LeaveGroupRequest,
    now: i64,
    out: &mut Output,
) {
    let v = ctx.api_version;
    let group_id = r.group_id.0.to_string();
    let identities: Vec<(String, Option<String>)> = if v >= 3 {
        r.members
            .iter()
            .map(|m| {
                (
                    m.member_id.to_string(),
                    m.group_instance_id.as_ref().map(|i| i.to_string()),
                )
            })
            .collect()
    } else {
        vec![(r.member_id.to_string(), None)]
    };
    let top = |code: i16| LeaveGroupResponse::default().with_error_code(code);
    if group_id.is_empty() {
        return out.replies.push((
            id,
            GroupResponse::Leave(top(err(ResponseError::InvalidGroupId))),
        ));
    }
    // An unknown group is no top-level error: every member gets UNKNOWN_MEMBER_ID
    // (`GroupCoordinatorService.leaveGroup` maps the group's absence to the members).
    let per_member = |results: Vec<MemberResponse>| {
        if v >= 3 {
            LeaveGroupResponse::default().with_members(results)
        } else {
            top(results.first().map(|r| r.error_code).unwrap_or(0))
        }
    };
    if c.consumer_groups.contains_key(&group_id) {
        // Admin removal of consumer-protocol members (`classicGroupLeaveToConsumerGroup`).
        let results = super::consumer::leave_by_identities(c, &group_id, &identities, now, out);
        return out
            .replies
            .push((id, GroupResponse::Leave(per_member(results))));
    }
    let Some(g) = c.groups.get(&group_id) else {
        let results = identities
            .iter()
            .map(|(mid, iid)| {
                MemberResponse::default()
                    .with_member_id(s(mid))
                    .with_group_instance_id(iid.as_deref().map(s))
                    .with_error_code(err(ResponseError::UnknownMemberId))
            })
            .collect();
        return out
            .replies
            .push((id, GroupResponse::Leave(per_member(results))));
    };
    if g.state == State::Dead {
        return out.replies.push((
            id,
            GroupResponse::Leave(top(err(ResponseError::CoordinatorNotAvailable))),
        ));
    }
    let mut results = Vec::new();
    let mut left = false;
    for (mid, iid) in identities {
        let g = c.groups.get_mut(&group_id).expect("present");
        let code = if mid.is_empty() && iid.is_some() {
            // Admin removal of a static member by instance id.
            match g
                .static_member(iid.as_deref().unwrap_or_default())
                .map(str::to_string)
            {
                None => err(ResponseError::UnknownMemberId),
                Some(holder) => {
                    remove_member_quietly(c, &group_id, &holder, out);
                    left = true;
                    0
                }
            }
        } else if g.pending_members.remove(&mid) {
            c.timers.cancel(&TimerKey::PendingMember {
                group: group_id.clone(),
                member: mid.clone(),
            });
            left = true;
            0
        } else {
            match g.validate_member(&mid, iid.as_deref()) {
                Err(code) => code,
                Ok(()) => {
                    remove_member_quietly(c, &group_id, &mid, out);
                    left = true;
                    0
                }
            }
        };
        results.push(
            MemberResponse::default()
                .with_member_id(s(&mid))
                .with_group_instance_id(iid.as_deref().map(s))
                .with_error_code(code),
        );
    }
    if left {
        after_members_left(c, &group_id, now, out);
    }
    out.replies
        .push((id, GroupResponse::Leave(per_member(results))));
}

/// Remove a member without triggering the state change yet (the caller does it once for a batch).
fn remove_member_quietly(c: &mut Coordinator, group_id: &str, member_id: &str, out: &mut Output) {
    let g = c.groups.get_mut(group_id).expect("present");
    if let Some(m) = g.members.shift_remove(member_id) {
        if let Some(p) = m.awaiting_join {
            reply_join(
                out,
                p.req,
                join_error(err(ResponseError::UnknownMemberId), member_id, p.version),
            );
        }
        if let Some(p) = m.awaiting_sync {
            reply_sync(
                out,
                p.req,
                err(ResponseError::UnknownMemberId),
                Bytes::new(),
                None,
            );
        }
    }
    g.pending_sync.remove(member_id);
    if g.leader.as_deref() == Some(member_id) {
        g.leader = g.members.keys().next().cloned();
    }
    cancel_heartbeat(c, group_id, member_id);
}

/// DescribeGroups for one group (`ClassicGroup.describe`).
pub fn describe(c: &Coordinator, group_id: &str, version: i16) -> DescribedGroup {
    let base = DescribedGroup::default()
        .with_group_id(GroupId(s(group_id)))
        .with_authorized_operations(i32::MIN);
    if c.consumer_groups.contains_key(group_id) {
        // Kafka's DescribeGroups only describes classic groups (`GMM.describeGroups`): a
        // consumer-protocol group is "Dead" before v6 and GROUP_ID_NOT_FOUND from v6; admin
        // clients describe it with ConsumerGroupDescribe.
        return if version >= 6 {
            base.with_error_code(err(ResponseError::GroupIdNotFound))
                .with_error_message(Some(s(&format!(
                    "Group {group_id} is not a classic group."
                ))))
                .with_group_state(s("Dead"))
        } else {
            base.with_group_state(s("Dead"))
        };
    }
    let Some(g) = c.groups.get(group_id).filter(|g| g.state != State::Dead) else {
        // v6 reports GROUP_ID_NOT_FOUND; older versions describe a "Dead" group (KIP-1043).
        return if version >= 6 {
            base.with_error_code(err(ResponseError::GroupIdNotFound))
                .with_error_message(Some(s(&format!("Group {group_id} not found."))))
                .with_group_state(s("Dead"))
        } else {
            base.with_group_state(s("Dead"))
        };
    };
    let stable = g.state == State::Stable;
    let members = g
        .members
        .values()
        .map(|m| {
            let d = DescribedGroupMember::default()
                .with_member_id(s(&m.member_id))
                .with_group_instance_id(m.instance_id.as_deref().map(s))
                .with_client_id(s(&m.client_id))
                .with_client_host(s(&m.client_host));
            if stable {
                let p = g.protocol_name.as_deref().unwrap_or_default();
                d.with_member_metadata(m.metadata_for(p))
                    .with_member_assignment(m.assignment.clone())
            } else {
                d
            }
        })
        .collect();
    base.with_group_state(s(g.state.name()))
        .with_protocol_type(s(g.protocol_type.as_deref().unwrap_or("")))
        .with_protocol_data(s(if stable {
            g.protocol_name.as_deref().unwrap_or("")
        } else {
            ""
        }))
        .with_members(members)
}

/// ListGroups over this partition, filtered by state and type (lower-cased filters).
pub fn list(c: &Coordinator, states: &[String], types: &[String]) -> Vec<ListedGroup> {
    let wants_type = |t: &str| types.is_empty() || types.iter().any(|x| x == t);
    let wants_state =
        |st: &str| states.is_empty() || states.iter().any(|x| x.eq_ignore_ascii_case(st));
    let mut out: Vec<ListedGroup> = Vec::new();
    if wants_type("classic") {
        out.extend(
            c.groups
                .values()
                .filter(|g| g.state != State::Dead && wants_state(g.state.name()))
                .map(|g| {
                    ListedGroup::default()
                        .with_group_id(GroupId(s(&g.group_id)))
                        .with_protocol_type(s(g.protocol_type.as_deref().unwrap_or("")))
                        .with_group_state(s(g.state.name()))
                        .with_group_type(s("classic"))
                }),
        );
    }
    if wants_type("consumer") {
        out.extend(
            c.consumer_groups
                .values()
                .filter(|g| wants_state(g.state_name()))
                .map(|g| {
                    ListedGroup::default()
                        .with_group_id(GroupId(s(&g.group_id)))
                        .with_protocol_type(s("consumer"))
                        .with_group_state(s(g.state_name()))
                        .with_group_type(s("consumer"))
                }),
        );
    }
    out
}

/// Rebuild a group from its GroupMetadata record: a group with members loads as Stable with
/// that generation, an empty one as Empty (Kafka's `replay` of GroupMetadataValue).
pub fn replay_metadata(c: &mut Coordinator, group_id: &str, v: &GroupMetadataValue) {
    let mut g = c
        .groups
        .remove(group_id)
        .unwrap_or_else(|| ClassicGroup::new(group_id, v.current_state_timestamp));
    g.protocol_type = if v.protocol_type.is_empty() && v.members.is_empty() {
        None
    } else {
        Some(v.protocol_type.clone())
    };
    g.generation = v.generation;
    g.protocol_name = v.protocol.clone();
    g.leader = v.leader.clone();
    g.state_timestamp = v.current_state_timestamp;
    // Members recorded by this coordinator keep their in-memory extras (parked requests); a
    // replay from disk starts from the record alone.
    let mut members = IndexMap::new();
    for rm in &v.members {
        let prev = g.members.shift_remove(&rm.member_id);
        // A record stores only the selected protocol's metadata, so a member this coordinator
        // already knows keeps its other protocols; but the record's metadata wins for the
        // selected one. (Keeping the old metadata made a replay of the log hold a member's
        // subscription from an older record: stale subscribed topics after every restart.)
        let recorded = |proto: &String| (proto.clone(), Bytes::from(rm.subscription.clone()));
        let protocols = match (&v.protocol, prev.as_ref()) {
            (Some(proto), Some(p)) if p.supports(proto) => p
                .protocols
                .iter()
                .map(|(n, m)| {
                    if n == proto {
                        recorded(proto)
                    } else {
                        (n.clone(), m.clone())
                    }
                })
                .collect(),
            (None, Some(p)) => p.protocols.clone(),
            (Some(proto), _) => vec![recorded(proto)],
            (None, None) => Vec::new(),
        };
        members.insert(
            rm.member_id.clone(),
            Member {
                member_id: rm.member_id.clone(),
                instance_id: rm.group_instance_id.clone(),
                client_id: rm.client_id.clone(),
                client_host: rm.client_host.clone(),
                rebalance_timeout_ms: rm.rebalance_timeout,
                session_timeout_ms: rm.session_timeout,
                protocol_type: v.protocol_type.clone(),
                protocols,
                assignment: Bytes::from(rm.assignment.clone()),
                awaiting_join: prev.as_ref().and_then(|p| p.awaiting_join),
                awaiting_sync: prev.as_ref().and_then(|p| p.awaiting_sync),
                is_new: false,
                // The session timer is not part of the record: it stays as it was.
                session_deadline: prev.as_ref().map_or(0, |p| p.session_deadline),
                session_timer: prev.as_ref().and_then(|p| p.session_timer),
            },
        );
    }
    g.members = members;
    // Records are written only on reaching Stable (leader's sync, static replacement) or Empty
    // (a join phase with no members), so that is the state a record describes.
    g.state = if g.members.is_empty() {
        State::Empty
    } else {
        State::Stable
    };
    g.subscribed_topics = g.compute_subscribed_topics();
    g.last_record = Some(v.clone());
    c.groups.insert(group_id.to_string(), g);
}
