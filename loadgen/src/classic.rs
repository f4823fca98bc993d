//! A classic-protocol consumer (JoinGroup / SyncGroup / Heartbeat), as a pure state machine.
//!
//! It follows what Kafka clients do (reference §5.5, §9):
//! - join with an empty member id; on MEMBER_ID_REQUIRED rejoin at once with the id it got;
//! - the leader decodes every member's subscription and runs the range assignor, then SyncGroup
//!   with all assignments; followers SyncGroup with none;
//! - once stable: OffsetFetch its partitions once, Heartbeat every interval (the next one is due
//!   an interval after the previous was *sent*, and never before its response arrived), and
//!   OffsetCommit its partitions every commit interval with growing fake offsets;
//! - REBALANCE_IN_PROGRESS (heartbeat, commit, sync) → rejoin keeping the member id;
//!   UNKNOWN_MEMBER_ID / ILLEGAL_GENERATION → rejoin from scratch;
//!   coordinator errors or a lost connection → back off and retry.
//!
//! Normal protocol signals (MEMBER_ID_REQUIRED, REBALANCE_IN_PROGRESS) are not errors; everything
//! else that is not NONE is reported as `Action::Error`.

use crate::api::{client_error, Api};
use crate::assign::{self, Assigned};
use crate::member::{Action, Ctx, MemberMachine, Micros, Rng, TimerKind};
use bytes::Bytes;
use kafka_protocol::messages::join_group_request::JoinGroupRequestProtocol;
use kafka_protocol::messages::leave_group_request::MemberIdentity;
use kafka_protocol::messages::offset_commit_request::{
    OffsetCommitRequestPartition, OffsetCommitRequestTopic,
};
use kafka_protocol::messages::offset_fetch_request::{
    OffsetFetchRequestGroup, OffsetFetchRequestTopic, OffsetFetchRequestTopics,
};
use kafka_protocol::messages::sync_group_request::SyncGroupRequestAssignment;
use kafka_protocol::messages::*;
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::ResponseError;
use wire::{Request, Response};

/// Kafka's "no error" code. `ResponseError` has no variant for it (`try_from_code(0)` is `None`);
/// every other code the state machine reacts to is a `ResponseError` variant.
const NONE: i16 = 0;

/// Where the member is in its life.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    /// Not started yet.
    New,
    /// A JoinGroup is in flight.
    Joining,
    /// A SyncGroup is in flight.
    Syncing,
    /// Has a generation and an assignment; heartbeating and committing.
    Stable,
    /// Waiting out a backoff before rejoining.
    Backoff,
    /// A LeaveGroup is in flight.
    Leaving,
    /// Done (after shutdown).
    Stopped,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum AfterLeave {
    Rejoin,
    Stop,
}

/// One simulated classic consumer.
#[derive(Debug, Clone)]
pub struct ClassicMember {
    phase: Phase,
    epoch: u32,
    member_id: StrBytes,
    generation: i32,
    is_leader: bool,
    /// Set while a join sequence is under way; `join_started_us` is when it began.
    converging: bool,
    join_started_us: Micros,
    /// Retry a join from scratch (true) or with the member id (false) after the backoff.
    retry_fresh: bool,
    after_leave: AfterLeave,
    assignment: Vec<Assigned>,
    /// The next offset to commit per assigned partition (parallel to `assignment`).
    offsets: Vec<i64>,
    hb_sent_us: Micros,
    commit_sent_us: Micros,
    commit_in_flight: bool,
    rng: Rng,
}

impl ClassicMember {
    /// A member whose timer jitter is seeded by `seed` (its global index).
    pub fn new(seed: u64) -> Self {
        ClassicMember {
            phase: Phase::New,
            epoch: 0,
            member_id: StrBytes::default(),
            generation: -1,
            is_leader: false,
            converging: false,
            join_started_us: 0,
            retry_fresh: false,
            after_leave: AfterLeave::Stop,
            assignment: Vec::new(),
            offsets: Vec::new(),
            hb_sent_us: 0,
            commit_sent_us: 0,
            commit_in_flight: false,
            rng: Rng::new(seed),
        }
    }

    pub fn phase(&self) -> Phase {
        self.phase
    }
    pub fn member_id(&self) -> &str {
        &self.member_id
    }
    pub fn generation(&self) -> i32 {
        self.generation
    }
    pub fn is_leader(&self) -> bool {
        self.is_leader
    }
    pub fn assignment(&self) -> &[Assigned] {
        &self.assignment
    }
    /// Next offsets to commit, parallel to `assignment()`.
    pub fn offsets(&self) -> &[i64] {
        &self.offsets
    }

    // ---- transitions ----

    /// Start (or restart) a join sequence. `fresh` forgets the member id.
    fn begin_join(&mut self, cx: &Ctx, fresh: bool, now: Micros, out: &mut Vec<Action>) {
        if fresh {
            self.member_id = StrBytes::default();
            self.generation = -1;
        }
        if !self.converging {
            self.converging = true;
            self.join_started_us = now;
        }
        self.epoch = self.epoch.wrapping_add(1);
        self.phase = Phase::Joining;
        self.is_leader = false;
        self.assignment.clear();
        self.offsets.clear();
        self.commit_in_flight = false;
        out.push(Action::Send(self.join_request(cx)));
    }

    fn backoff(&mut self, cx: &Ctx, fresh: bool, now: Micros, out: &mut Vec<Action>) {
        self.epoch = self.epoch.wrapping_add(1);
        self.phase = Phase::Backoff;
        self.retry_fresh = fresh;
        if !self.converging {
            self.converging = true;
            self.join_started_us = now;
        }
        out.push(Action::Timer {
            kind: TimerKind::Retry,
            at_us: now + cx.cfg.retry_backoff_us,
        });
    }

    fn become_stable(
        &mut self,
        cx: &Ctx,
        assignment: Vec<Assigned>,
        now: Micros,
        out: &mut Vec<Action>,
    ) {
        self.phase = Phase::Stable;
        let convergence_us = now.saturating_sub(self.join_started_us);
        self.converging = false;
        self.offsets = vec![0; assignment.len()];
        self.assignment = assignment;
        self.commit_in_flight = false;
        out.push(Action::Stable { convergence_us });
        if cx.cfg.closed_loop_heartbeats {
            // Members of a group all become stable at once; spread their first heartbeat over
            // one interval so the load is not a synchronized burst forever after.
            out.push(Action::Timer {
                kind: TimerKind::Heartbeat,
                at_us: now + self.rng.upto(cx.cfg.heartbeat_interval_us),
            });
        }
        if !self.assignment.is_empty() {
            out.push(Action::Send(self.offset_fetch_request(cx)));
            if cx.cfg.commit_interval_us > 0 {
                out.push(Action::Timer {
                    kind: TimerKind::Commit,
                    at_us: now + self.rng.upto(cx.cfg.commit_interval_us),
                });
            }
        }
    }

    fn send_leave(&mut self, cx: &Ctx, then: AfterLeave, out: &mut Vec<Action>) {
        self.epoch = self.epoch.wrapping_add(1);
        self.phase = Phase::Leaving;
        self.after_leave = then;
        self.converging = false;
        out.push(Action::Send(self.leave_request(cx)));
    }

    fn after_leaving(&mut self, cx: &Ctx, now: Micros, out: &mut Vec<Action>) {
        match self.after_leave {
            AfterLeave::Rejoin => self.begin_join(cx, true, now, out),
            AfterLeave::Stop => {
                self.epoch = self.epoch.wrapping_add(1);
                self.phase = Phase::Stopped;
            }
        }
    }

    fn on_join(&mut self, cx: &Ctx, r: JoinGroupResponse, now: Micros, out: &mut Vec<Action>) {
        if self.phase != Phase::Joining {
            return;
        }
        let code = r.error_code;
        match ResponseError::try_from_code(code) {
            None => {
                self.member_id = r.member_id;
                self.generation = r.generation_id;
                self.is_leader = r.leader == self.member_id;
                self.phase = Phase::Syncing;
                let assignments = if self.is_leader {
                    self.leader_assignments(cx, &r.members, out)
                } else {
                    Vec::new()
                };
                out.push(Action::Send(self.sync_request(cx, assignments)));
            }
            Some(ResponseError::MemberIdRequired) => {
                // KIP-394: the broker registered us as pending; join again with the id at once.
                self.member_id = r.member_id;
                out.push(Action::Send(self.join_request(cx)));
            }
            Some(ResponseError::RebalanceInProgress) => {
                out.push(Action::Send(self.join_request(cx)))
            }
            Some(ResponseError::UnknownMemberId) => {
                out.push(Action::Error {
                    api: Api::JoinGroup,
                    code,
                });
                self.begin_join(cx, true, now, out);
            }
            Some(_) if wire::error::is_coordinator_unavailable(code) => {
                out.push(Action::Error {
                    api: Api::JoinGroup,
                    code,
                });
                self.backoff(cx, false, now, out);
            }
            Some(_) => {
                out.push(Action::Error {
                    api: Api::JoinGroup,
                    code,
                });
                self.backoff(cx, true, now, out);
            }
        }
    }

    /// Run the range assignor over the members the JoinGroup response lists.
    fn leader_assignments(
        &mut self,
        cx: &Ctx,
        members: &[join_group_response::JoinGroupResponseMember],
        out: &mut Vec<Action>,
    ) -> Vec<SyncGroupRequestAssignment> {
        let mut subs = Vec::with_capacity(members.len());
        for m in members {
            let topics = match assign::decode_subscription(&m.metadata) {
                Ok(t) => t,
                Err(_) => {
                    out.push(Action::Error {
                        api: Api::JoinGroup,
                        code: client_error::BAD_RESPONSE,
                    });
                    Vec::new()
                }
            };
            subs.push((m.member_id.clone(), topics));
        }
        assign::range_assign(&subs, cx.topics)
            .into_iter()
            .map(|(member_id, parts)| {
                SyncGroupRequestAssignment::default()
                    .with_member_id(member_id)
                    .with_assignment(assign::encode_assignment(&parts))
            })
            .collect()
    }

    fn on_sync(&mut self, cx: &Ctx, r: SyncGroupResponse, now: Micros, out: &mut Vec<Action>) {
        if self.phase != Phase::Syncing {
            return;
        }
        let code = r.error_code;
        match ResponseError::try_from_code(code) {
            None => {
                let assignment = match assign::decode_assignment(&r.assignment, cx.topics) {
                    Ok(a) => a,
                    Err(_) => {
                        out.push(Action::Error {
                            api: Api::SyncGroup,
                            code: client_error::BAD_RESPONSE,
                        });
                        Vec::new()
                    }
                };
                self.become_stable(cx, assignment, now, out);
            }
            Some(ResponseError::RebalanceInProgress) => self.begin_join(cx, false, now, out),
            Some(ResponseError::UnknownMemberId | ResponseError::IllegalGeneration) => {
                out.push(Action::Error {
                    api: Api::SyncGroup,
                    code,
                });
                self.begin_join(cx, true, now, out);
            }
            Some(_) => {
                out.push(Action::Error {
                    api: Api::SyncGroup,
                    code,
                });
                self.backoff(cx, false, now, out);
            }
        }
    }

    fn on_heartbeat(&mut self, cx: &Ctx, code: i16, now: Micros, out: &mut Vec<Action>) {
        if self.phase != Phase::Stable {
            return;
        }
        match ResponseError::try_from_code(code) {
            None => {
                if cx.cfg.closed_loop_heartbeats {
                    let next = (self.hb_sent_us + cx.cfg.heartbeat_interval_us).max(now);
                    out.push(Action::Timer {
                        kind: TimerKind::Heartbeat,
                        at_us: next,
                    });
                }
            }
            Some(ResponseError::RebalanceInProgress) => self.begin_join(cx, false, now, out),
            Some(ResponseError::UnknownMemberId | ResponseError::IllegalGeneration) => {
                out.push(Action::Error {
                    api: Api::Heartbeat,
                    code,
                });
                self.begin_join(cx, true, now, out);
            }
            Some(_) => {
                out.push(Action::Error {
                    api: Api::Heartbeat,
                    code,
                });
                if cx.cfg.closed_loop_heartbeats {
                    out.push(Action::Timer {
                        kind: TimerKind::Heartbeat,
                        at_us: now + cx.cfg.retry_backoff_us,
                    });
                }
            }
        }
    }

    fn on_commit(&mut self, cx: &Ctx, r: OffsetCommitResponse, now: Micros, out: &mut Vec<Action>) {
        if self.phase != Phase::Stable {
            return;
        }
        self.commit_in_flight = false;
        let code = r
            .topics
            .iter()
            .flat_map(|t| t.partitions.iter())
            .map(|p| p.error_code)
            .find(|&c| c != NONE)
            .unwrap_or(NONE);
        let next_commit = (self.commit_sent_us + cx.cfg.commit_interval_us).max(now);
        match ResponseError::try_from_code(code) {
            None => out.push(Action::Timer {
                kind: TimerKind::Commit,
                at_us: next_commit,
            }),
            Some(ResponseError::RebalanceInProgress) => self.begin_join(cx, false, now, out),
            Some(ResponseError::UnknownMemberId | ResponseError::IllegalGeneration) => {
                out.push(Action::Error {
                    api: Api::OffsetCommit,
                    code,
                });
                self.begin_join(cx, true, now, out);
            }
            Some(_) => {
                out.push(Action::Error {
                    api: Api::OffsetCommit,
                    code,
                });
                out.push(Action::Timer {
                    kind: TimerKind::Commit,
                    at_us: next_commit,
                });
            }
        }
    }

    fn on_fetch(&mut self, cx: &Ctx, r: OffsetFetchResponse, out: &mut Vec<Action>) {
        if self.phase != Phase::Stable {
            return;
        }
        // v8+ answers per group; v2-7 at the top level; every version per partition.
        let mut err = r.error_code;
        let mut found: Vec<(StrBytes, i32, i64, i16)> = Vec::new();
        for g in &r.groups {
            if err == NONE {
                err = g.error_code;
            }
            for t in &g.topics {
                for p in &t.partitions {
                    found.push((
                        t.name.0.clone(),
                        p.partition_index,
                        p.committed_offset,
                        p.error_code,
                    ));
                }
            }
        }
        for t in &r.topics {
            for p in &t.partitions {
                found.push((
                    t.name.0.clone(),
                    p.partition_index,
                    p.committed_offset,
                    p.error_code,
                ));
            }
        }
        for (topic, partition, committed, perr) in found {
            if perr != NONE {
                if err == NONE {
                    err = perr;
                }
                continue;
            }
            let Some(ti) = cx.topics.iter().position(|t| t.name == topic) else {
                continue;
            };
            if let Ok(i) = self.assignment.binary_search(&(ti as u16, partition)) {
                // Continue from what the previous owner committed, so offsets only grow.
                self.offsets[i] = self.offsets[i].max(committed);
            }
        }
        if err != NONE {
            out.push(Action::Error {
                api: Api::OffsetFetch,
                code: err,
            });
        }
    }

    fn on_leave(&mut self, cx: &Ctx, r: LeaveGroupResponse, now: Micros, out: &mut Vec<Action>) {
        if self.phase != Phase::Leaving {
            return;
        }
        let err = if r.error_code != NONE {
            r.error_code
        } else {
            r.members
                .iter()
                .map(|m| m.error_code)
                .find(|&c| c != NONE)
                .unwrap_or(NONE)
        };
        if err != NONE {
            out.push(Action::Error {
                api: Api::LeaveGroup,
                code: err,
            });
        }
        self.after_leaving(cx, now, out);
    }

    // ---- requests ----

    pub fn join_request(&self, cx: &Ctx) -> Request {
        let v = cx.versions.v(Api::JoinGroup);
        Request::JoinGroup(
            JoinGroupRequest::default()
                .with_group_id(cx.group_id.clone())
                .with_session_timeout_ms(cx.cfg.session_timeout_ms)
                .with_rebalance_timeout_ms(if v >= 1 {
                    cx.cfg.rebalance_timeout_ms
                } else {
                    -1
                })
                .with_member_id(self.member_id.clone())
                .with_protocol_type(StrBytes::from_static_str(assign::PROTOCOL_TYPE))
                .with_protocols(vec![JoinGroupRequestProtocol::default()
                    .with_name(StrBytes::from_static_str(assign::ASSIGNOR))
                    .with_metadata(cx.subscription.clone())]),
        )
    }

    fn sync_request(&self, cx: &Ctx, assignments: Vec<SyncGroupRequestAssignment>) -> Request {
        let v = cx.versions.v(Api::SyncGroup);
        let mut r = SyncGroupRequest::default()
            .with_group_id(cx.group_id.clone())
            .with_generation_id(self.generation)
            .with_member_id(self.member_id.clone())
            .with_assignments(assignments);
        if v >= 5 {
            r = r
                .with_protocol_type(Some(StrBytes::from_static_str(assign::PROTOCOL_TYPE)))
                .with_protocol_name(Some(StrBytes::from_static_str(assign::ASSIGNOR)));
        }
        Request::SyncGroup(r)
    }

    fn heartbeat_request(&self, cx: &Ctx) -> Request {
        Request::Heartbeat(
            HeartbeatRequest::default()
                .with_group_id(cx.group_id.clone())
                .with_generation_id(self.generation)
                .with_member_id(self.member_id.clone()),
        )
    }

    fn leave_request(&self, cx: &Ctx) -> Request {
        let v = cx.versions.v(Api::LeaveGroup);
        let r = LeaveGroupRequest::default().with_group_id(cx.group_id.clone());
        Request::LeaveGroup(if v >= 3 {
            let reason = (v >= 5).then(|| StrBytes::from_static_str("loadgen member leaving"));
            r.with_members(vec![MemberIdentity::default()
                .with_member_id(self.member_id.clone())
                .with_reason(reason)])
        } else {
            r.with_member_id(self.member_id.clone())
        })
    }

    /// The assigned partitions grouped by topic: (topic index, partitions, offsets).
    fn by_topic(&self) -> Vec<(usize, Vec<(i32, i64)>)> {
        let mut out: Vec<(usize, Vec<(i32, i64)>)> = Vec::new();
        for (i, &(t, p)) in self.assignment.iter().enumerate() {
            let off = self.offsets.get(i).copied().unwrap_or(0);
            match out.last_mut() {
                Some((lt, v)) if *lt == t as usize => v.push((p, off)),
                _ => out.push((t as usize, vec![(p, off)])),
            }
        }
        out
    }

    fn offset_commit_request(&self, cx: &Ctx) -> Request {
        let topics = self
            .by_topic()
            .into_iter()
            .map(|(t, parts)| {
                OffsetCommitRequestTopic::default()
                    .with_name(TopicName(cx.topics[t].name.clone()))
                    .with_partitions(
                        parts
                            .into_iter()
                            .map(|(p, off)| {
                                OffsetCommitRequestPartition::default()
                                    .with_partition_index(p)
                                    .with_committed_offset(off)
                                    .with_committed_metadata(Some(StrBytes::default()))
                            })
                            .collect(),
                    )
            })
            .collect();
        Request::OffsetCommit(
            OffsetCommitRequest::default()
                .with_group_id(cx.group_id.clone())
                .with_generation_id_or_member_epoch(self.generation)
                .with_member_id(self.member_id.clone())
                .with_topics(topics),
        )
    }

    fn offset_fetch_request(&self, cx: &Ctx) -> Request {
        let v = cx.versions.v(Api::OffsetFetch);
        let parts = self.by_topic();
        let r = if v >= 8 {
            let topics = parts
                .into_iter()
                .map(|(t, ps)| {
                    OffsetFetchRequestTopics::default()
                        .with_name(TopicName(cx.topics[t].name.clone()))
                        .with_partition_indexes(ps.into_iter().map(|(p, _)| p).collect())
                })
                .collect();
            OffsetFetchRequest::default().with_groups(vec![OffsetFetchRequestGroup::default()
                .with_group_id(cx.group_id.clone())
                .with_topics(Some(topics))])
        } else {
            let topics = parts
                .into_iter()
                .map(|(t, ps)| {
                    OffsetFetchRequestTopic::default()
                        .with_name(TopicName(cx.topics[t].name.clone()))
                        .with_partition_indexes(ps.into_iter().map(|(p, _)| p).collect())
                })
                .collect();
            OffsetFetchRequest::default()
                .with_group_id(cx.group_id.clone())
                .with_topics(Some(topics))
        };
        Request::OffsetFetch(r.with_require_stable(v >= 7))
    }
}

impl MemberMachine for ClassicMember {
    fn start(&mut self, cx: &Ctx, now: Micros, out: &mut Vec<Action>) {
        self.converging = false;
        self.begin_join(cx, true, now, out);
    }

    fn on_timer(&mut self, cx: &Ctx, kind: TimerKind, now: Micros, out: &mut Vec<Action>) {
        match (kind, self.phase) {
            (TimerKind::Heartbeat, Phase::Stable) => {
                self.hb_sent_us = now;
                out.push(Action::Send(self.heartbeat_request(cx)));
            }
            (TimerKind::Commit, Phase::Stable) => {
                if self.commit_in_flight || self.assignment.is_empty() {
                    return;
                }
                for o in &mut self.offsets {
                    *o += cx.cfg.commit_offset_step;
                }
                self.commit_in_flight = true;
                self.commit_sent_us = now;
                out.push(Action::Send(self.offset_commit_request(cx)));
            }
            (TimerKind::Retry, Phase::Backoff) => {
                let fresh = self.retry_fresh;
                self.begin_join(cx, fresh, now, out);
            }
            _ => {}
        }
    }

    fn on_response(&mut self, cx: &Ctx, resp: Response, now: Micros, out: &mut Vec<Action>) {
        match resp {
            Response::JoinGroup(r) => self.on_join(cx, r, now, out),
            Response::SyncGroup(r) => self.on_sync(cx, r, now, out),
            Response::Heartbeat(r) => self.on_heartbeat(cx, r.error_code, now, out),
            Response::OffsetCommit(r) => self.on_commit(cx, r, now, out),
            Response::OffsetFetch(r) => self.on_fetch(cx, r, out),
            Response::LeaveGroup(r) => self.on_leave(cx, r, now, out),
            _ => {}
        }
    }

    fn on_lost(&mut self, cx: &Ctx, api: Api, now: Micros, out: &mut Vec<Action>) {
        match (api, self.phase) {
            (Api::JoinGroup, Phase::Joining) | (Api::SyncGroup, Phase::Syncing) => {
                self.backoff(cx, false, now, out)
            }
            (Api::Heartbeat, Phase::Stable) if cx.cfg.closed_loop_heartbeats => {
                out.push(Action::Timer {
                    kind: TimerKind::Heartbeat,
                    at_us: now + cx.cfg.retry_backoff_us,
                });
            }
            (Api::OffsetCommit, Phase::Stable) => {
                self.commit_in_flight = false;
                out.push(Action::Timer {
                    kind: TimerKind::Commit,
                    at_us: now + cx.cfg.retry_backoff_us,
                });
            }
            (Api::LeaveGroup, Phase::Leaving) => self.after_leaving(cx, now, out),
            _ => {}
        }
    }

    fn churn(&mut self, cx: &Ctx, _now: Micros, out: &mut Vec<Action>) -> bool {
        if self.phase != Phase::Stable {
            return false;
        }
        self.send_leave(cx, AfterLeave::Rejoin, out);
        true
    }

    fn shutdown(&mut self, cx: &Ctx, leave: bool, _now: Micros, out: &mut Vec<Action>) {
        match self.phase {
            Phase::Stopped => {}
            Phase::Leaving => self.after_leave = AfterLeave::Stop,
            _ if leave && !self.member_id.is_empty() => self.send_leave(cx, AfterLeave::Stop, out),
            _ => {
                self.epoch = self.epoch.wrapping_add(1);
                self.phase = Phase::Stopped;
            }
        }
    }

    fn open_loop_heartbeat(&mut self, cx: &Ctx, now: Micros, out: &mut Vec<Action>) -> bool {
        if self.phase != Phase::Stable {
            return false;
        }
        self.hb_sent_us = now;
        out.push(Action::Send(self.heartbeat_request(cx)));
        true
    }

    fn epoch(&self) -> u32 {
        self.epoch
    }
    fn is_stable(&self) -> bool {
        self.phase == Phase::Stable
    }
    fn is_done(&self) -> bool {
        self.phase == Phase::Stopped
    }
    fn owned_partitions(&self) -> &[Assigned] {
        if self.phase == Phase::Stable {
            &self.assignment
        } else {
            &[]
        }
    }
}

/// The encoded subscription every member of a run offers (all topics).
pub fn subscription_for(topics: &[assign::TopicInfo]) -> Bytes {
    assign::encode_subscription(topics)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::Versions;
    use crate::assign::TopicInfo;
    use crate::member::MemberCfg;
    use bytes::BytesMut;
    use kafka_protocol::messages::join_group_response::JoinGroupResponseMember;
    use kafka_protocol::messages::leave_group_response::MemberResponse;
    use kafka_protocol::messages::offset_commit_response::{
        OffsetCommitResponsePartition, OffsetCommitResponseTopic,
    };
    use kafka_protocol::messages::offset_fetch_response::{
        OffsetFetchResponseGroup, OffsetFetchResponsePartitions, OffsetFetchResponseTopics,
    };

    const INTERVAL: Micros = 3_000_000;
    const COMMIT: Micros = 5_000_000;

    struct Env {
        cfg: MemberCfg,
        versions: Versions,
        group: GroupId,
        topics: Vec<TopicInfo>,
        sub: Bytes,
    }

    impl Env {
        fn new() -> Env {
            let topics = vec![TopicInfo {
                name: StrBytes::from_static_str("t0"),
                partitions: 4,
                id: uuid::Uuid::nil(),
            }];
            Env {
                cfg: MemberCfg {
                    heartbeat_interval_us: INTERVAL,
                    commit_interval_us: COMMIT,
                    ..MemberCfg::default()
                },
                versions: Versions::max_implemented(),
                group: GroupId(StrBytes::from_static_str("g")),
                sub: subscription_for(&topics),
                topics,
            }
        }
        fn cx(&self) -> Ctx<'_> {
            Ctx {
                cfg: &self.cfg,
                versions: &self.versions,
                group_id: &self.group,
                topics: &self.topics,
                subscription: &self.sub,
            }
        }
    }

    fn s(x: &str) -> StrBytes {
        StrBytes::from_string(x.to_string())
    }

    fn sends(out: &[Action]) -> Vec<&Request> {
        out.iter()
            .filter_map(|a| match a {
                Action::Send(r) => Some(r),
                _ => None,
            })
            .collect()
    }

    fn only_send(out: &[Action]) -> &Request {
        let s = sends(out);
        assert_eq!(s.len(), 1, "expected one request in {out:?}");
        s[0]
    }

    fn timer(out: &[Action], kind: TimerKind) -> Option<Micros> {
        out.iter().find_map(|a| match a {
            Action::Timer { kind: k, at_us } if *k == kind => Some(*at_us),
            _ => None,
        })
    }

    fn errors(out: &[Action]) -> Vec<(Api, i16)> {
        out.iter()
            .filter_map(|a| match a {
                Action::Error { api, code } => Some((*api, *code)),
                _ => None,
            })
            .collect()
    }

    fn join_resp(code: i16, member: &str, leader: &str, generation: i32) -> Response {
        Response::JoinGroup(
            JoinGroupResponse::default()
                .with_error_code(code)
                .with_member_id(s(member))
                .with_leader(s(leader))
                .with_generation_id(generation)
                .with_protocol_name(Some(s("range"))),
        )
    }

    fn sync_resp(code: i16, parts: &[i32]) -> Response {
        let assignment = if code == NONE {
            assign::encode_assignment(&[(s("t0"), parts.to_vec())])
        } else {
            Bytes::new()
        };
        Response::SyncGroup(
            SyncGroupResponse::default()
                .with_error_code(code)
                .with_assignment(assignment),
        )
    }

    fn hb_resp(code: i16) -> Response {
        Response::Heartbeat(HeartbeatResponse::default().with_error_code(code))
    }

    /// Drive a fresh member to Stable as a follower with partitions `parts`, at time 1000.
    fn stable_member(env: &Env, parts: &[i32]) -> (ClassicMember, Vec<Action>) {
        let cx = env.cx();
        let mut m = ClassicMember::new(7);
        let mut out = Vec::new();
        m.start(&cx, 0, &mut out);
        out.clear();
        m.on_response(
            &cx,
            join_resp(ResponseError::MemberIdRequired.code(), "m-1", "", -1),
            10,
            &mut out,
        );
        out.clear();
        m.on_response(&cx, join_resp(NONE, "m-1", "m-0", 1), 500, &mut out);
        out.clear();
        m.on_response(&cx, sync_resp(NONE, parts), 1000, &mut out);
        assert!(m.is_stable());
        (m, out)
    }

    #[test]
    fn joins_with_an_empty_id_then_the_id_the_broker_requires() {
        let env = Env::new();
        let cx = env.cx();
        let mut m = ClassicMember::new(1);
        let mut out = Vec::new();
        m.start(&cx, 0, &mut out);
        let Request::JoinGroup(j) = only_send(&out) else {
            panic!("{out:?}")
        };
        assert_eq!(j.group_id.0.as_str(), "g");
        assert_eq!(j.member_id.as_str(), "");
        assert_eq!(j.session_timeout_ms, 45_000);
        assert_eq!(j.rebalance_timeout_ms, 300_000);
        assert_eq!(j.protocol_type.as_str(), "consumer");
        assert_eq!(j.protocols.len(), 1);
        assert_eq!(j.protocols[0].name.as_str(), "range");
        assert_eq!(
            assign::decode_subscription(&j.protocols[0].metadata).unwrap(),
            vec![s("t0")]
        );
        assert_eq!(m.phase(), Phase::Joining);
        let epoch = m.epoch();

        out.clear();
        m.on_response(
            &cx,
            join_resp(ResponseError::MemberIdRequired.code(), "m-1", "", -1),
            5,
            &mut out,
        );
        let Request::JoinGroup(j) = only_send(&out) else {
            panic!("{out:?}")
        };
        assert_eq!(j.member_id.as_str(), "m-1");
        assert!(
            errors(&out).is_empty(),
            "MEMBER_ID_REQUIRED is a signal, not an error"
        );
        assert_eq!(m.epoch(), epoch, "same join sequence");
    }

    #[test]
    fn follower_syncs_with_no_assignments_then_becomes_stable() {
        let env = Env::new();
        let cx = env.cx();
        let mut m = ClassicMember::new(1);
        let mut out = Vec::new();
        m.start(&cx, 100, &mut out);
        out.clear();
        m.on_response(&cx, join_resp(NONE, "m-1", "m-0", 4), 200, &mut out);
        let Request::SyncGroup(sg) = only_send(&out) else {
            panic!("{out:?}")
        };
        assert_eq!(sg.generation_id, 4);
        assert_eq!(sg.member_id.as_str(), "m-1");
        assert!(sg.assignments.is_empty());
        assert_eq!(sg.protocol_type.as_deref(), Some("consumer"));
        assert_eq!(sg.protocol_name.as_deref(), Some("range"));
        assert!(!m.is_leader());

        out.clear();
        m.on_response(&cx, sync_resp(NONE, &[2, 3]), 10_100, &mut out);
        assert!(m.is_stable());
        assert_eq!(m.assignment(), &[(0, 2), (0, 3)]);
        assert!(out.contains(&Action::Stable {
            convergence_us: 10_000
        }));
        // First heartbeat jittered within one interval; first commit within one commit interval.
        let hb = timer(&out, TimerKind::Heartbeat).unwrap();
        assert!(hb > 10_100 && hb <= 10_100 + INTERVAL);
        let c = timer(&out, TimerKind::Commit).unwrap();
        assert!(c > 10_100 && c <= 10_100 + COMMIT);
        // One OffsetFetch for the new assignment.
        let Request::OffsetFetch(f) = only_send(&out) else {
            panic!("{out:?}")
        };
        assert_eq!(f.groups.len(), 1);
        assert_eq!(f.groups[0].group_id.0.as_str(), "g");
        let topics = f.groups[0].topics.as_ref().unwrap();
        assert_eq!(topics[0].partition_indexes, vec![2, 3]);
        assert!(f.require_stable);
    }

    #[test]
    fn leader_assigns_ranges_to_every_member() {
        let env = Env::new();
        let cx = env.cx();
        let mut m = ClassicMember::new(1);
        let mut out = Vec::new();
        m.start(&cx, 0, &mut out);
        out.clear();
        let members = ["m-b", "m-a", "m-c"]
            .iter()
            .map(|id| {
                JoinGroupResponseMember::default()
                    .with_member_id(s(id))
                    .with_metadata(env.sub.clone())
            })
            .collect();
        let Response::JoinGroup(r) = join_resp(NONE, "m-a", "m-a", 1) else {
            unreachable!()
        };
        m.on_response(
            &cx,
            Response::JoinGroup(r.with_members(members)),
            10,
            &mut out,
        );
        assert!(m.is_leader());
        let Request::SyncGroup(sg) = only_send(&out) else {
            panic!("{out:?}")
        };
        assert_eq!(sg.assignments.len(), 3);
        let got: Vec<(String, Vec<Assigned>)> = sg
            .assignments
            .iter()
            .map(|a| {
                (
                    a.member_id.to_string(),
                    assign::decode_assignment(&a.assignment, &env.topics).unwrap(),
                )
            })
            .collect();
        // 4 partitions over 3 members sorted by id: 2, 1, 1.
        assert_eq!(
            got,
            vec![
                ("m-a".to_string(), vec![(0, 0), (0, 1)]),
                ("m-b".to_string(), vec![(0, 2)]),
                ("m-c".to_string(), vec![(0, 3)]),
            ]
        );
    }

    #[test]
    fn heartbeats_on_the_interval_after_each_response() {
        let env = Env::new();
        let cx = env.cx();
        let (mut m, _) = stable_member(&env, &[0]);
        let mut out = Vec::new();
        m.on_timer(&cx, TimerKind::Heartbeat, 2_000_000, &mut out);
        let Request::Heartbeat(h) = only_send(&out) else {
            panic!("{out:?}")
        };
        assert_eq!(
            (h.generation_id, h.member_id.as_str(), h.group_id.0.as_str()),
            (1, "m-1", "g")
        );
        out.clear();
        // Answered quickly: next one an interval after the send.
        m.on_response(&cx, hb_resp(NONE), 2_000_300, &mut out);
        assert_eq!(
            timer(&out, TimerKind::Heartbeat),
            Some(2_000_000 + INTERVAL)
        );
        // Answered late: next one right away (never two in flight).
        out.clear();
        m.on_timer(&cx, TimerKind::Heartbeat, 5_000_000, &mut out);
        out.clear();
        m.on_response(&cx, hb_resp(NONE), 9_000_000, &mut out);
        assert_eq!(timer(&out, TimerKind::Heartbeat), Some(9_000_000));
        assert!(sends(&out).is_empty());
    }

    #[test]
    fn rebalance_in_progress_rejoins_with_the_member_id() {
        let env = Env::new();
        let cx = env.cx();
        let (mut m, _) = stable_member(&env, &[0]);
        let epoch = m.epoch();
        let mut out = Vec::new();
        m.on_timer(&cx, TimerKind::Heartbeat, 2_000_000, &mut out);
        out.clear();
        m.on_response(
            &cx,
            hb_resp(ResponseError::RebalanceInProgress.code()),
            2_000_100,
            &mut out,
        );
        let Request::JoinGroup(j) = only_send(&out) else {
            panic!("{out:?}")
        };
        assert_eq!(j.member_id.as_str(), "m-1");
        assert!(errors(&out).is_empty());
        assert!(!m.is_stable());
        assert_ne!(m.epoch(), epoch, "old heartbeats and timers are now stale");
        // A sync that is interrupted by another rebalance keeps the original join start.
        out.clear();
        m.on_response(&cx, join_resp(NONE, "m-1", "m-0", 2), 2_100_000, &mut out);
        out.clear();
        m.on_response(
            &cx,
            sync_resp(ResponseError::RebalanceInProgress.code(), &[]),
            2_200_000,
            &mut out,
        );
        assert!(errors(&out).is_empty());
        let Request::JoinGroup(j) = only_send(&out) else {
            panic!("{out:?}")
        };
        assert_eq!(j.member_id.as_str(), "m-1");
        out.clear();
        m.on_response(&cx, join_resp(NONE, "m-1", "m-0", 3), 2_300_000, &mut out);
        out.clear();
        m.on_response(&cx, sync_resp(NONE, &[1]), 2_400_000, &mut out);
        assert!(out.contains(&Action::Stable {
            convergence_us: 400_000 - 100
        }));
        assert_eq!(m.generation(), 3);
    }

    #[test]
    fn fenced_members_rejoin_from_scratch() {
        for fence in [
            ResponseError::UnknownMemberId.code(),
            ResponseError::IllegalGeneration.code(),
        ] {
            let env = Env::new();
            let cx = env.cx();
            let (mut m, _) = stable_member(&env, &[0]);
            let mut out = Vec::new();
            m.on_timer(&cx, TimerKind::Heartbeat, 2_000_000, &mut out);
            out.clear();
            m.on_response(&cx, hb_resp(fence), 2_000_100, &mut out);
            assert_eq!(errors(&out), vec![(Api::Heartbeat, fence)]);
            let Request::JoinGroup(j) = only_send(&out) else {
                panic!("{out:?}")
            };
            assert_eq!(j.member_id.as_str(), "", "from scratch");
            assert_eq!(m.generation(), -1);
        }
    }

    #[test]
    fn commits_growing_offsets_and_continues_from_fetched_ones() {
        let env = Env::new();
        let cx = env.cx();
        let (mut m, _) = stable_member(&env, &[1, 3]);
        let mut out = Vec::new();
        // The fetch finds an earlier owner's commit on partition 3.
        let fetch =
            OffsetFetchResponse::default().with_groups(vec![OffsetFetchResponseGroup::default()
                .with_group_id(env.group.clone())
                .with_topics(vec![OffsetFetchResponseTopics::default()
                    .with_name(TopicName(s("t0")))
                    .with_partitions(vec![
                        OffsetFetchResponsePartitions::default()
                            .with_partition_index(1)
                            .with_committed_offset(-1),
                        OffsetFetchResponsePartitions::default()
                            .with_partition_index(3)
                            .with_committed_offset(500),
                    ])])]);
        m.on_response(&cx, Response::OffsetFetch(fetch), 1500, &mut out);
        assert!(errors(&out).is_empty());
        assert_eq!(m.offsets(), &[0, 500]);

        let mut committed = Vec::new();
        for round in 0..3u64 {
            out.clear();
            let t = 6_000_000 + round * COMMIT;
            m.on_timer(&cx, TimerKind::Commit, t, &mut out);
            let Request::OffsetCommit(c) = only_send(&out) else {
                panic!("{out:?}")
            };
            assert_eq!(c.generation_id_or_member_epoch, 1);
            assert_eq!(c.member_id.as_str(), "m-1");
            let parts: Vec<(i32, i64)> = c.topics[0]
                .partitions
                .iter()
                .map(|p| (p.partition_index, p.committed_offset))
                .collect();
            committed.push(parts);
            // A second timer while the commit is in flight sends nothing.
            out.clear();
            m.on_timer(&cx, TimerKind::Commit, t + 1, &mut out);
            assert!(sends(&out).is_empty());
            out.clear();
            let ok = OffsetCommitResponse::default().with_topics(vec![
                OffsetCommitResponseTopic::default()
                    .with_name(TopicName(s("t0")))
                    .with_partitions(vec![
                        OffsetCommitResponsePartition::default().with_partition_index(1)
                    ]),
            ]);
            m.on_response(&cx, Response::OffsetCommit(ok), t + 2000, &mut out);
            assert_eq!(timer(&out, TimerKind::Commit), Some(t + COMMIT));
        }
        assert_eq!(
            committed,
            vec![
                vec![(1, 10), (3, 510)],
                vec![(1, 20), (3, 520)],
                vec![(1, 30), (3, 530)]
            ]
        );
        // A commit answered REBALANCE_IN_PROGRESS makes the member rejoin (not an error).
        out.clear();
        m.on_timer(&cx, TimerKind::Commit, 30_000_000, &mut out);
        out.clear();
        let rip =
            OffsetCommitResponse::default().with_topics(vec![OffsetCommitResponseTopic::default()
                .with_name(TopicName(s("t0")))
                .with_partitions(vec![OffsetCommitResponsePartition::default()
                    .with_partition_index(1)
                    .with_error_code(ResponseError::RebalanceInProgress.code())])]);
        m.on_response(&cx, Response::OffsetCommit(rip), 30_000_100, &mut out);
        assert!(errors(&out).is_empty());
        assert!(matches!(only_send(&out), Request::JoinGroup(_)));
    }

    #[test]
    fn members_without_partitions_neither_fetch_nor_commit() {
        let env = Env::new();
        let (m, out) = stable_member(&env, &[]);
        assert!(m.assignment().is_empty());
        assert!(sends(&out).is_empty());
        assert_eq!(timer(&out, TimerKind::Commit), None);
        assert!(timer(&out, TimerKind::Heartbeat).is_some());
    }

    #[test]
    fn churn_leaves_then_joins_as_a_new_member() {
        let env = Env::new();
        let cx = env.cx();
        let (mut m, _) = stable_member(&env, &[0]);
        let mut out = Vec::new();
        assert!(m.churn(&cx, 5_000_000, &mut out));
        let Request::LeaveGroup(l) = only_send(&out) else {
            panic!("{out:?}")
        };
        assert_eq!(l.members.len(), 1);
        assert_eq!(l.members[0].member_id.as_str(), "m-1");
        assert!(!m.is_stable());
        // Churn only picks stable members.
        out.clear();
        assert!(!m.churn(&cx, 5_000_001, &mut out));
        assert!(out.is_empty());

        out.clear();
        let resp = LeaveGroupResponse::default()
            .with_members(vec![MemberResponse::default().with_member_id(s("m-1"))]);
        m.on_response(&cx, Response::LeaveGroup(resp), 5_001_000, &mut out);
        let Request::JoinGroup(j) = only_send(&out) else {
            panic!("{out:?}")
        };
        assert_eq!(j.member_id.as_str(), "");
        out.clear();
        m.on_response(&cx, join_resp(NONE, "m-9", "m-9", 5), 5_002_000, &mut out);
        out.clear();
        m.on_response(&cx, sync_resp(NONE, &[0]), 5_011_000, &mut out);
        // Convergence counts from the rejoin, not from the first join of the run.
        assert!(out.contains(&Action::Stable {
            convergence_us: 10_000
        }));
        assert_eq!(m.member_id(), "m-9");
    }

    #[test]
    fn shutdown_leaves_and_stops() {
        let env = Env::new();
        let cx = env.cx();
        let (mut m, _) = stable_member(&env, &[0]);
        let mut out = Vec::new();
        m.shutdown(&cx, true, 9_000_000, &mut out);
        assert!(matches!(only_send(&out), Request::LeaveGroup(_)));
        assert!(!m.is_done());
        out.clear();
        m.on_response(
            &cx,
            Response::LeaveGroup(LeaveGroupResponse::default()),
            9_000_500,
            &mut out,
        );
        assert!(m.is_done());
        assert!(out.is_empty());

        // A member that never got an id just stops.
        let mut fresh = ClassicMember::new(3);
        fresh.start(&cx, 0, &mut out);
        out.clear();
        fresh.shutdown(&cx, true, 1, &mut out);
        assert!(fresh.is_done() && out.is_empty());

        // A failed leave is an error, and the member still stops.
        let (mut m, _) = stable_member(&env, &[0]);
        m.shutdown(&cx, true, 9_000_000, &mut out);
        out.clear();
        let resp = LeaveGroupResponse::default().with_members(vec![MemberResponse::default()
            .with_member_id(s("m-1"))
            .with_error_code(ResponseError::UnknownMemberId.code())]);
        m.on_response(&cx, Response::LeaveGroup(resp), 9_000_500, &mut out);
        assert_eq!(
            errors(&out),
            vec![(Api::LeaveGroup, ResponseError::UnknownMemberId.code())]
        );
        assert!(m.is_done());
    }

    #[test]
    fn coordinator_errors_back_off_and_retry() {
        let env = Env::new();
        let cx = env.cx();
        let mut m = ClassicMember::new(1);
        let mut out = Vec::new();
        m.start(&cx, 0, &mut out);
        out.clear();
        m.on_response(
            &cx,
            join_resp(ResponseError::CoordinatorNotAvailable.code(), "", "", -1),
            50,
            &mut out,
        );
        assert_eq!(
            errors(&out),
            vec![(
                Api::JoinGroup,
                ResponseError::CoordinatorNotAvailable.code()
            )]
        );
        assert!(sends(&out).is_empty());
        let at = timer(&out, TimerKind::Retry).unwrap();
        assert_eq!(at, 50 + env.cfg.retry_backoff_us);
        assert_eq!(m.phase(), Phase::Backoff);
        out.clear();
        m.on_timer(&cx, TimerKind::Retry, at, &mut out);
        assert!(matches!(only_send(&out), Request::JoinGroup(_)));
    }

    #[test]
    fn lost_requests_are_retried() {
        let env = Env::new();
        let cx = env.cx();
        let (mut m, _) = stable_member(&env, &[0]);
        let mut out = Vec::new();
        m.on_timer(&cx, TimerKind::Heartbeat, 2_000_000, &mut out);
        out.clear();
        m.on_lost(&cx, Api::Heartbeat, 2_500_000, &mut out);
        assert_eq!(
            timer(&out, TimerKind::Heartbeat),
            Some(2_500_000 + env.cfg.retry_backoff_us)
        );
        // A lost JoinGroup backs off and retries with the member id.
        out.clear();
        m.on_response(
            &cx,
            hb_resp(ResponseError::RebalanceInProgress.code()),
            3_000_000,
            &mut out,
        );
        out.clear();
        m.on_lost(&cx, Api::JoinGroup, 3_100_000, &mut out);
        let at = timer(&out, TimerKind::Retry).unwrap();
        out.clear();
        m.on_timer(&cx, TimerKind::Retry, at, &mut out);
        let Request::JoinGroup(j) = only_send(&out) else {
            panic!("{out:?}")
        };
        assert_eq!(j.member_id.as_str(), "m-1");
    }

    #[test]
    fn open_loop_heartbeats_only_when_stable_and_schedule_nothing() {
        let mut env = Env::new();
        env.cfg.closed_loop_heartbeats = false;
        let cx = env.cx();
        let mut m = ClassicMember::new(1);
        let mut out = Vec::new();
        assert!(!m.open_loop_heartbeat(&cx, 0, &mut out));
        let (mut m, first) = stable_member(&env, &[0]);
        assert_eq!(timer(&first, TimerKind::Heartbeat), None);
        assert!(m.open_loop_heartbeat(&cx, 10, &mut out));
        assert!(m.open_loop_heartbeat(&cx, 11, &mut out)); // several may be in flight
        assert_eq!(sends(&out).len(), 2);
        out.clear();
        m.on_response(&cx, hb_resp(NONE), 20, &mut out);
        assert!(out.is_empty());
    }

    #[test]
    fn requests_encode_at_every_version_loadgen_implements() {
        // Version-dependent fields (LeaveGroup members vs member id, OffsetFetch groups vs group id,
        // SyncGroup protocol fields, ...) must be set so the codec accepts every version.
        for api in [
            Api::JoinGroup,
            Api::SyncGroup,
            Api::Heartbeat,
            Api::LeaveGroup,
            Api::OffsetCommit,
            Api::OffsetFetch,
        ] {
            let (lo, hi) = api.implemented();
            for v in lo..=hi {
                let mut env = Env::new();
                env.versions = Versions::max_implemented().with(api, v);
                let cx = env.cx();
                let (mut m, first) = stable_member(&env, &[0, 1]);
                let mut out = first;
                m.on_timer(&cx, TimerKind::Heartbeat, 2_000_000, &mut out);
                m.on_timer(&cx, TimerKind::Commit, 2_000_000, &mut out);
                out.push(Action::Send(m.join_request(&cx)));
                out.push(Action::Send(m.sync_request(&cx, vec![])));
                m.shutdown(&cx, true, 3_000_000, &mut out);
                for r in sends(&out) {
                    let Some(ra) = Api::from_key(r.api_key()) else {
                        continue;
                    };
                    if ra != api {
                        continue;
                    }
                    // Encode as a frame and decode it with the broker-side decoder: the request
                    // must round-trip unchanged at this version.
                    let mut buf = BytesMut::new();
                    crate::net::encode_frame(&mut buf, api.key(), v, 9, "t", r)
                        .unwrap_or_else(|e| panic!("{} v{v}: {e}", api.name()));
                    let table = wire::Versions::new(&[wire::ApiRange {
                        api_key: api.key(),
                        min: lo,
                        max: hi,
                    }]);
                    let (_, back) = wire::decode_request(&buf.split_off(4).freeze(), &table)
                        .unwrap_or_else(|e| panic!("{} v{v}: {e:?}", api.name()));
                    if let (Request::LeaveGroup(l), true) = (&back, v >= 3) {
                        assert_eq!(l.members[0].member_id.as_str(), "m-1");
                    }
                    assert_eq!(&back, r, "{} v{v}", api.name());
                }
            }
        }
    }
}
