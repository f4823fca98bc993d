//! A KIP-848 consumer (ConsumerGroupHeartbeat, api key 68), as a pure state machine.
//!
//! It follows what librdkafka sends (reference §9) and the broker rules of §5.6:
//! - join: member epoch 0 with a client-made member id (22 URL-safe base64 characters; v1
//!   requires one), the subscribed topic names (every loadgen topic), the rebalance timeout, and
//!   an empty (not null) owned-partition list;
//! - then a heartbeat every interval the broker returns in `heartbeat_interval_ms` — the one of
//!   the latest response, which may change from one response to the next (Ringleader returns a
//!   short one while a member reconciles) — (`MemberCfg::heartbeat_interval_override_us`, from
//!   `--heartbeat-interval-ms`, replaces it when given), never two in flight, scheduled as the
//!   Java client does (`HeartbeatRequestState`): an interval after the previous heartbeat was
//!   *sent*, or the new interval from the response that changed it. No jitter: members that
//!   start together heartbeat together, as real consumers do (`--ramp-up` spreads them). Fields that did not change are null (-1 for the
//!   rebalance timeout); `topic_partitions` carries the owned partitions only when they changed
//!   since the last heartbeat;
//! - a response with an assignment: revoked = owned − new are dropped at once (the member
//!   "revokes"), added = new − owned are taken; the member then acknowledges by reporting its
//!   owned partitions in a heartbeat sent right away (as the Java client and librdkafka do once
//!   reconciliation finishes);
//! - OffsetFetch (v9, member id + epoch) once after the first non-empty assignment, sent before
//!   the acknowledging heartbeat so it carries the epoch the broker has for the member;
//!   OffsetCommit (v9, member id + current epoch) of the owned partitions every commit interval,
//!   never while a heartbeat is in flight (that heartbeat may move the epoch, and the commit
//!   would then be stale);
//! - FENCED_MEMBER_EPOCH / UNKNOWN_MEMBER_ID → drop everything and rejoin with epoch 0 and the
//!   same member id; coordinator errors, other errors and lost heartbeats → back off, then send a
//!   full heartbeat (every field) or, while joining, the join again;
//! - churn and shutdown: leave with epoch -1; churn then rejoins as a new member (new id).
//!
//! **Stable** (what the live "stable" count, churn and the convergence histogram use): after a
//! successful heartbeat response that leaves nothing to report — no assignment change to
//! acknowledge — and either the member owns partitions, or it owns none and its epoch stayed the
//! same across a heartbeat that reported nothing (an empty assignment is taken as final once a
//! whole quiet heartbeat has passed). With `--expect-partitions K` instead: once it owns at least
//! K partitions (the protocol does not say whether more are coming: a member may be waiting for
//! partitions another still revokes, and with a short interval a quiet heartbeat proves nothing).
//! A stable member that gets a new assignment is not stable until it has acknowledged it. **Convergence** runs from the start of a join (the epoch-0
//! heartbeat, or the first one of a rejoin after fencing or churn) to the first stable state;
//! later reconciliations of a member that stays in the group are not convergence samples.
//!
//! Every response code other than NONE is reported as an `Action::Error` (none is a normal signal
//! in this protocol).

use crate::api::{client_error, Api};
use crate::assign::Assigned;
use crate::member::{Action, Ctx, MemberMachine, Micros, Rng, TimerKind};
use kafka_protocol::messages::consumer_group_heartbeat_request::TopicPartitions as OwnedTopic;
use kafka_protocol::messages::offset_commit_request::{
    OffsetCommitRequestPartition, OffsetCommitRequestTopic,
};
use kafka_protocol::messages::offset_fetch_request::{
    OffsetFetchRequestGroup, OffsetFetchRequestTopics,
};
use kafka_protocol::messages::*;
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::ResponseError;
use wire::{Request, Response};

/// Kafka's "no error" code. `ResponseError` has no variant for it (`try_from_code(0)` is `None`);
/// every other code the state machine reacts to is a `ResponseError` variant.
const NONE: i16 = 0;

/// Member epoch of a leave request.
pub const LEAVE_EPOCH: i32 = -1;
/// Length of a client-made member id (librdkafka: 22 URL-safe base64 characters, a UUID's 16
/// bytes).
pub const MEMBER_ID_LEN: usize = 22;

/// Where the member is in its life.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    /// Not started yet.
    New,
    /// The epoch-0 heartbeat is in flight.
    Joining,
    /// In the group (member epoch > 0): heartbeating, reconciling, committing.
    Member,
    /// Waiting out a backoff before joining again.
    Backoff,
    /// The epoch -1 heartbeat is in flight.
    Leaving,
    /// Done (after shutdown).
    Stopped,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum AfterLeave {
    Rejoin,
    Stop,
}

/// One simulated KIP-848 consumer.
#[derive(Debug, Clone)]
pub struct ConsumerMember {
    phase: Phase,
    epoch: u32,
    member_id: StrBytes,
    member_epoch: i32,
    /// Owned partitions, sorted; `offsets` is parallel to it.
    owned: Vec<Assigned>,
    offsets: Vec<i64>,
    /// The owned set changed since the last heartbeat that reported it.
    owned_unreported: bool,
    /// The next heartbeat carries every field (after a lost or failed one).
    send_full: bool,
    hb_in_flight: bool,
    /// The heartbeat in flight reported the owned partitions.
    hb_reported_owned: bool,
    hb_sent_us: Micros,
    /// The broker's heartbeat interval (0 until the first response).
    broker_interval_us: Micros,
    stable: bool,
    converging: bool,
    join_started_us: Micros,
    /// OffsetFetch sent since the last join.
    fetched: bool,
    commit_timer_set: bool,
    commit_in_flight: bool,
    /// A commit came due while a heartbeat was in flight; send it with that heartbeat's answer.
    commit_due: bool,
    commit_sent_us: Micros,
    after_leave: AfterLeave,
    rng: Rng,
}

const ID_ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";

impl ConsumerMember {
    /// A member whose ids and timer jitter come from `seed`.
    pub fn new(seed: u64) -> Self {
        ConsumerMember {
            phase: Phase::New,
            epoch: 0,
            member_id: StrBytes::default(),
            member_epoch: 0,
            owned: Vec::new(),
            offsets: Vec::new(),
            owned_unreported: false,
            send_full: false,
            hb_in_flight: false,
            hb_reported_owned: false,
            hb_sent_us: 0,
            broker_interval_us: 0,
            stable: false,
            converging: false,
            join_started_us: 0,
            fetched: false,
            commit_timer_set: false,
            commit_in_flight: false,
            commit_due: false,
            commit_sent_us: 0,
            after_leave: AfterLeave::Stop,
            rng: Rng::new(seed),
        }
    }

    pub fn phase(&self) -> Phase {
        self.phase
    }
    pub fn member_id(&self) -> &str {
        &self.member_id
    }
    pub fn member_epoch(&self) -> i32 {
        self.member_epoch
    }
    pub fn owned(&self) -> &[Assigned] {
        &self.owned
    }
    pub fn offsets(&self) -> &[i64] {
        &self.offsets
    }

    fn new_member_id(&mut self) -> StrBytes {
        let mut id = String::with_capacity(MEMBER_ID_LEN);
        let mut bits = 0u64;
        let mut left = 0;
        for _ in 0..MEMBER_ID_LEN {
            if left == 0 {
                bits = self.rng.next_u64();
                left = 10; // 10 six-bit characters per 64 random bits
            }
            id.push(ID_ALPHABET[(bits & 63) as usize] as char);
            bits >>= 6;
            left -= 1;
        }
        StrBytes::from_string(id)
    }

    /// The heartbeat interval in use.
    fn interval_us(&self, cx: &Ctx) -> Micros {
        cx.cfg
            .heartbeat_interval_override_us
            .or((self.broker_interval_us > 0).then_some(self.broker_interval_us))
            .unwrap_or(cx.cfg.heartbeat_interval_us)
            .max(1)
    }

    // ---- transitions ----

    /// Join (epoch 0), with a new member id or the current one.
    fn begin_join(&mut self, cx: &Ctx, new_id: bool, now: Micros, out: &mut Vec<Action>) {
        if new_id || self.member_id.is_empty() {
            self.member_id = self.new_member_id();
        }
        if !self.converging {
            self.converging = true;
            self.join_started_us = now;
        }
        self.epoch = self.epoch.wrapping_add(1);
        self.phase = Phase::Joining;
        self.member_epoch = 0;
        self.owned.clear();
        self.offsets.clear();
        self.owned_unreported = false;
        self.send_full = false;
        self.stable = false;
        self.fetched = false;
        self.commit_timer_set = false;
        self.commit_in_flight = false;
        self.commit_due = false;
        self.hb_in_flight = true;
        self.hb_reported_owned = true;
        self.hb_sent_us = now;
        out.push(Action::Send(self.full_request(cx, 0)));
    }

    /// Wait, then join again (same member id).
    fn backoff_join(&mut self, cx: &Ctx, now: Micros, out: &mut Vec<Action>) {
        self.epoch = self.epoch.wrapping_add(1);
        self.phase = Phase::Backoff;
        self.hb_in_flight = false;
        if !self.converging {
            self.converging = true;
            self.join_started_us = now;
        }
        out.push(Action::Timer {
            kind: TimerKind::Retry,
            at_us: now + cx.cfg.retry_backoff_us,
        });
    }

    /// Wait, then send a full heartbeat (the member stays in the group).
    fn backoff_heartbeat(&mut self, cx: &Ctx, now: Micros, out: &mut Vec<Action>) {
        self.hb_in_flight = false;
        self.send_full = true;
        out.push(Action::Timer {
            kind: TimerKind::Heartbeat,
            at_us: now + cx.cfg.retry_backoff_us,
        });
    }

    fn send_heartbeat(&mut self, cx: &Ctx, now: Micros, out: &mut Vec<Action>) {
        let req = if self.send_full {
            self.full_request(cx, self.member_epoch)
        } else {
            let mut r = ConsumerGroupHeartbeatRequest::default()
                .with_group_id(cx.group_id.clone())
                .with_member_id(self.member_id.clone())
                .with_member_epoch(self.member_epoch);
            if self.owned_unreported {
                r = r.with_topic_partitions(Some(self.owned_topics(cx)));
            }
            Request::ConsumerGroupHeartbeat(r)
        };
        self.hb_reported_owned = self.send_full || self.owned_unreported;
        self.send_full = false;
        self.owned_unreported = false;
        self.hb_in_flight = true;
        self.hb_sent_us = now;
        out.push(Action::Send(req));
    }

    fn send_commit(&mut self, cx: &Ctx, now: Micros, out: &mut Vec<Action>) {
        for o in &mut self.offsets {
            *o += cx.cfg.commit_offset_step;
        }
        self.commit_in_flight = true;
        self.commit_sent_us = now;
        out.push(Action::Send(self.offset_commit_request(cx)));
    }

    fn send_leave(&mut self, cx: &Ctx, then: AfterLeave, out: &mut Vec<Action>) {
        self.epoch = self.epoch.wrapping_add(1);
        self.phase = Phase::Leaving;
        self.after_leave = then;
        self.converging = false;
        self.stable = false;
        self.hb_in_flight = true;
        out.push(Action::Send(self.leave_request(cx)));
    }

    fn after_leaving(&mut self, cx: &Ctx, now: Micros, out: &mut Vec<Action>) {
        self.owned.clear();
        self.offsets.clear();
        match self.after_leave {
            AfterLeave::Rejoin => self.begin_join(cx, true, now, out),
            AfterLeave::Stop => {
                self.epoch = self.epoch.wrapping_add(1);
                self.phase = Phase::Stopped;
                self.hb_in_flight = false;
            }
        }
    }

    /// The assignment in a response as sorted (topic index, partition) pairs; `None` when a
    /// topic id is not one of ours.
    fn decode_assignment(
        cx: &Ctx,
        a: &consumer_group_heartbeat_response::Assignment,
    ) -> Option<Vec<Assigned>> {
        let mut out = Vec::new();
        for t in &a.topic_partitions {
            let ti = cx.topics.iter().position(|x| x.id == t.topic_id)?;
            out.extend(t.partitions.iter().map(|&p| (ti as u16, p)));
        }
        out.sort_unstable();
        out.dedup();
        Some(out)
    }

    fn on_heartbeat(
        &mut self,
        cx: &Ctx,
        r: ConsumerGroupHeartbeatResponse,
        now: Micros,
        out: &mut Vec<Action>,
    ) {
        if self.phase == Phase::Leaving {
            if r.error_code != NONE {
                out.push(Action::Error {
                    api: Api::ConsumerGroupHeartbeat,
                    code: r.error_code,
                });
            }
            return self.after_leaving(cx, now, out);
        }
        if !matches!(self.phase, Phase::Joining | Phase::Member) || !self.hb_in_flight {
            return;
        }
        self.hb_in_flight = false;
        let joining = self.phase == Phase::Joining;
        match ResponseError::try_from_code(r.error_code) {
            None => {}
            Some(ResponseError::FencedMemberEpoch | ResponseError::UnknownMemberId) => {
                out.push(Action::Error {
                    api: Api::ConsumerGroupHeartbeat,
                    code: r.error_code,
                });
                // The broker no longer counts our partitions as ours: drop them, rejoin.
                return self.begin_join(cx, false, now, out);
            }
            Some(_) => {
                // Coordinator errors (and anything unexpected): back off and try again.
                out.push(Action::Error {
                    api: Api::ConsumerGroupHeartbeat,
                    code: r.error_code,
                });
                return if joining {
                    self.backoff_join(cx, now, out)
                } else {
                    self.backoff_heartbeat(cx, now, out)
                };
            }
        }
        if let Some(id) = r.member_id.filter(|id| !id.is_empty()) {
            self.member_id = id;
        }
        let prev_epoch = self.member_epoch;
        self.member_epoch = r.member_epoch;
        // Every response's interval is the one to use from now on, as the Java client and
        // librdkafka take it: a broker may shorten it while the member reconciles (Ringleader's
        // `group.consumer.reconciliation.heartbeat.interval.ms`) and lengthen it once stable.
        let prev_interval_us = self.broker_interval_us;
        if r.heartbeat_interval_ms > 0 {
            self.broker_interval_us = r.heartbeat_interval_ms as Micros * 1000;
        }
        let interval_changed = cx.cfg.heartbeat_interval_override_us.is_none()
            && self.broker_interval_us != prev_interval_us;
        self.phase = Phase::Member;
        let mut changed = false;
        if let Some(a) = &r.assignment {
            match Self::decode_assignment(cx, a) {
                Some(new) if new != self.owned => {
                    // Revoke what is gone (keep nothing of it), take what was added; offsets of
                    // kept partitions carry on.
                    let offsets = new
                        .iter()
                        .map(|tp| {
                            self.owned
                                .binary_search(tp)
                                .map(|i| self.offsets[i])
                                .unwrap_or(0)
                        })
                        .collect();
                    self.owned = new;
                    self.offsets = offsets;
                    self.owned_unreported = true;
                    changed = true;
                }
                Some(_) => {}
                None => out.push(Action::Error {
                    api: Api::ConsumerGroupHeartbeat,
                    code: client_error::BAD_RESPONSE,
                }),
            }
        }
        let has_its_share = match cx.cfg.expect_partitions {
            Some(k) => self.owned.len() >= k,
            None => {
                !self.owned.is_empty()
                    || (!joining && !self.hb_reported_owned && prev_epoch == self.member_epoch)
            }
        };
        if changed {
            self.stable = false;
        } else if !self.owned_unreported && has_its_share && !self.stable {
            self.stable = true;
            if self.converging {
                self.converging = false;
                out.push(Action::Stable {
                    convergence_us: now.saturating_sub(self.join_started_us),
                });
            }
        }
        // Before the acknowledging heartbeat (which may move the epoch): fetch once, and any
        // commit that came due while this heartbeat was in flight.
        if !self.fetched && !self.owned.is_empty() {
            self.fetched = true;
            out.push(Action::Send(self.offset_fetch_request(cx)));
            if cx.cfg.commit_interval_us > 0 && !self.commit_timer_set {
                self.commit_timer_set = true;
                out.push(Action::Timer {
                    kind: TimerKind::Commit,
                    at_us: now + self.rng.upto(cx.cfg.commit_interval_us),
                });
            }
        }
        if self.commit_due {
            self.commit_due = false;
            if !self.owned.is_empty() && !self.commit_in_flight {
                self.send_commit(cx, now, out);
            } else {
                self.schedule_commit(cx, now, out);
            }
        }
        if self.owned_unreported {
            self.send_heartbeat(cx, now, out);
        } else if cx.cfg.closed_loop_heartbeats {
            // As the Java client schedules it (`HeartbeatRequestState`): an interval after the
            // last heartbeat was sent, or, when this response changed the interval, the new
            // interval from now (`updateHeartbeatIntervalMs` restarts the timer). No jitter:
            // members that join together heartbeat together, as real clients do (spread joins
            // with `--ramp-up`), and a convergence time is not shortened or lengthened by a
            // random first heartbeat that no client sends.
            let interval = self.interval_us(cx);
            let at = if interval_changed {
                now + interval
            } else {
                (self.hb_sent_us + interval).max(now)
            };
            out.push(Action::Timer {
                kind: TimerKind::Heartbeat,
                at_us: at,
            });
        }
    }

    fn schedule_commit(&mut self, cx: &Ctx, now: Micros, out: &mut Vec<Action>) {
        out.push(Action::Timer {
            kind: TimerKind::Commit,
            at_us: (self.commit_sent_us + cx.cfg.commit_interval_us).max(now + 1),
        });
    }

    fn on_commit(&mut self, cx: &Ctx, r: OffsetCommitResponse, now: Micros, out: &mut Vec<Action>) {
        if self.phase != Phase::Member || !self.commit_in_flight {
            return;
        }
        self.commit_in_flight = false;
        let err = r
            .topics
            .iter()
            .flat_map(|t| t.partitions.iter())
            .map(|p| p.error_code)
            .find(|&c| c != NONE)
            .unwrap_or(NONE);
        if err != NONE {
            // Fencing shows up on the next heartbeat; a stale epoch means the commit raced one.
            out.push(Action::Error {
                api: Api::OffsetCommit,
                code: err,
            });
        }
        self.schedule_commit(cx, now, out);
    }

    fn on_fetch(&mut self, cx: &Ctx, r: OffsetFetchResponse, out: &mut Vec<Action>) {
        if self.phase != Phase::Member {
            return;
        }
        let mut err = r.error_code;
        for g in &r.groups {
            if err == NONE {
                err = g.error_code;
            }
            for t in &g.topics {
                let Some(ti) = cx.topics.iter().position(|x| x.name == t.name.0) else {
                    continue;
                };
                for p in &t.partitions {
                    if p.error_code != NONE {
                        if err == NONE {
                            err = p.error_code;
                        }
                        continue;
                    }
                    if let Ok(i) = self.owned.binary_search(&(ti as u16, p.partition_index)) {
                        // Continue from what the previous owner committed.
                        self.offsets[i] = self.offsets[i].max(p.committed_offset);
                    }
                }
            }
        }
        if err != NONE {
            out.push(Action::Error {
                api: Api::OffsetFetch,
                code: err,
            });
        }
    }

    // ---- requests ----

    /// The owned partitions grouped by topic id.
    fn owned_topics(&self, cx: &Ctx) -> Vec<OwnedTopic> {
        let mut out: Vec<OwnedTopic> = Vec::new();
        let mut last = None;
        for &(t, p) in &self.owned {
            if last == Some(t) {
                if let Some(o) = out.last_mut() {
                    o.partitions.push(p);
                }
            } else {
                last = Some(t);
                out.push(
                    OwnedTopic::default()
                        .with_topic_id(cx.topics[t as usize].id)
                        .with_partitions(vec![p]),
                );
            }
        }
        out
    }

    /// A heartbeat with every field: the join (epoch 0) or a resend after a failure.
    fn full_request(&self, cx: &Ctx, member_epoch: i32) -> Request {
        Request::ConsumerGroupHeartbeat(
            ConsumerGroupHeartbeatRequest::default()
                .with_group_id(cx.group_id.clone())
                .with_member_id(self.member_id.clone())
                .with_member_epoch(member_epoch)
                .with_rebalance_timeout_ms(cx.cfg.rebalance_timeout_ms)
                .with_subscribed_topic_names(Some(
                    cx.topics
                        .iter()
                        .map(|t| TopicName(t.name.clone()))
                        .collect(),
                ))
                .with_topic_partitions(Some(self.owned_topics(cx))),
        )
    }

    fn leave_request(&self, cx: &Ctx) -> Request {
        Request::ConsumerGroupHeartbeat(
            ConsumerGroupHeartbeatRequest::default()
                .with_group_id(cx.group_id.clone())
                .with_member_id(self.member_id.clone())
                .with_member_epoch(LEAVE_EPOCH),
        )
    }

    /// Owned partitions by topic index with their next offsets.
    fn by_topic(&self) -> Vec<(usize, Vec<(i32, i64)>)> {
        let mut out: Vec<(usize, Vec<(i32, i64)>)> = Vec::new();
        for (i, &(t, p)) in self.owned.iter().enumerate() {
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
                .with_generation_id_or_member_epoch(self.member_epoch)
                .with_member_id(self.member_id.clone())
                .with_topics(topics),
        )
    }

    fn offset_fetch_request(&self, cx: &Ctx) -> Request {
        let topics = self
            .by_topic()
            .into_iter()
            .map(|(t, ps)| {
                OffsetFetchRequestTopics::default()
                    .with_name(TopicName(cx.topics[t].name.clone()))
                    .with_partition_indexes(ps.into_iter().map(|(p, _)| p).collect())
            })
            .collect();
        Request::OffsetFetch(
            OffsetFetchRequest::default()
                .with_groups(vec![OffsetFetchRequestGroup::default()
                    .with_group_id(cx.group_id.clone())
                    .with_member_id(Some(self.member_id.clone()))
                    .with_member_epoch(self.member_epoch)
                    .with_topics(Some(topics))])
                .with_require_stable(true),
        )
    }
}

impl MemberMachine for ConsumerMember {
    fn start(&mut self, cx: &Ctx, now: Micros, out: &mut Vec<Action>) {
        self.converging = false;
        self.begin_join(cx, true, now, out);
    }

    fn on_timer(&mut self, cx: &Ctx, kind: TimerKind, now: Micros, out: &mut Vec<Action>) {
        match (kind, self.phase) {
            (TimerKind::Heartbeat, Phase::Member) if !self.hb_in_flight => {
                self.send_heartbeat(cx, now, out)
            }
            (TimerKind::Commit, Phase::Member) => {
                if self.commit_in_flight || self.commit_due {
                    // The response (or the heartbeat's) schedules the next one.
                } else if self.owned.is_empty() {
                    self.commit_sent_us = now;
                    self.schedule_commit(cx, now, out);
                } else if self.hb_in_flight {
                    self.commit_due = true;
                } else {
                    self.send_commit(cx, now, out);
                }
            }
            (TimerKind::Retry, Phase::Backoff) => self.begin_join(cx, false, now, out),
            _ => {}
        }
    }

    fn on_response(&mut self, cx: &Ctx, resp: Response, now: Micros, out: &mut Vec<Action>) {
        match resp {
            Response::ConsumerGroupHeartbeat(r) => self.on_heartbeat(cx, r, now, out),
            Response::OffsetCommit(r) => self.on_commit(cx, r, now, out),
            Response::OffsetFetch(r) => self.on_fetch(cx, r, out),
            _ => {}
        }
    }

    fn on_lost(&mut self, cx: &Ctx, api: Api, now: Micros, out: &mut Vec<Action>) {
        match (api, self.phase) {
            (Api::ConsumerGroupHeartbeat, Phase::Joining) => self.backoff_join(cx, now, out),
            (Api::ConsumerGroupHeartbeat, Phase::Member) if self.hb_in_flight => {
                self.backoff_heartbeat(cx, now, out)
            }
            (Api::ConsumerGroupHeartbeat, Phase::Leaving) => self.after_leaving(cx, now, out),
            (Api::OffsetCommit, Phase::Member) if self.commit_in_flight => {
                self.commit_in_flight = false;
                out.push(Action::Timer {
                    kind: TimerKind::Commit,
                    at_us: now + cx.cfg.retry_backoff_us,
                });
            }
            _ => {}
        }
    }

    fn churn(&mut self, cx: &Ctx, _now: Micros, out: &mut Vec<Action>) -> bool {
        if !self.is_stable() {
            return false;
        }
        self.send_leave(cx, AfterLeave::Rejoin, out);
        true
    }

    fn shutdown(&mut self, cx: &Ctx, leave: bool, _now: Micros, out: &mut Vec<Action>) {
        match self.phase {
            Phase::Stopped => {}
            Phase::Leaving => self.after_leave = AfterLeave::Stop,
            Phase::Joining | Phase::Member if leave => self.send_leave(cx, AfterLeave::Stop, out),
            _ => {
                self.epoch = self.epoch.wrapping_add(1);
                self.phase = Phase::Stopped;
                self.stable = false;
            }
        }
    }

    fn open_loop_heartbeat(&mut self, _cx: &Ctx, _now: Micros, _out: &mut Vec<Action>) -> bool {
        // Open loop is refused for this protocol (`Args::validate`): heartbeats carry state.
        false
    }

    fn epoch(&self) -> u32 {
        self.epoch
    }
    fn is_stable(&self) -> bool {
        self.phase == Phase::Member && self.stable
    }
    fn is_done(&self) -> bool {
        self.phase == Phase::Stopped
    }
    fn owned_partitions(&self) -> &[Assigned] {
        if self.phase == Phase::Member {
            &self.owned
        } else {
            &[]
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::Versions;
    use crate::assign::TopicInfo;
    use crate::member::MemberCfg;
    use bytes::{Bytes, BytesMut};
    use consumer_group_heartbeat_response::{Assignment, TopicPartitions as RespTopic};
    use kafka_protocol::messages::offset_commit_response::{
        OffsetCommitResponsePartition, OffsetCommitResponseTopic,
    };

    const COMMIT: Micros = 5_000_000;
    const T0: uuid::Uuid = uuid::Uuid::from_u128(0x1111);
    const T1: uuid::Uuid = uuid::Uuid::from_u128(0x2222);

    struct Env {
        cfg: MemberCfg,
        versions: Versions,
        group: GroupId,
        topics: Vec<TopicInfo>,
        sub: Bytes,
    }

    impl Env {
        fn new() -> Env {
            Env {
                cfg: MemberCfg {
                    commit_interval_us: COMMIT,
                    rebalance_timeout_ms: 60_000,
                    ..MemberCfg::default()
                },
                versions: Versions::max_implemented(),
                group: GroupId(StrBytes::from_static_str("g")),
                topics: vec![
                    TopicInfo {
                        name: StrBytes::from_static_str("t0"),
                        partitions: 4,
                        id: T0,
                    },
                    TopicInfo {
                        name: StrBytes::from_static_str("t1"),
                        partitions: 2,
                        id: T1,
                    },
                ],
                sub: Bytes::new(),
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

    fn sends(out: &[Action]) -> Vec<&Request> {
        out.iter()
            .filter_map(|a| match a {
                Action::Send(r) => Some(r),
                _ => None,
            })
            .collect()
    }

    fn heartbeats(out: &[Action]) -> Vec<&ConsumerGroupHeartbeatRequest> {
        sends(out)
            .into_iter()
            .filter_map(|r| match r {
                Request::ConsumerGroupHeartbeat(h) => Some(h),
                _ => None,
            })
            .collect()
    }

    fn only_hb(out: &[Action]) -> &ConsumerGroupHeartbeatRequest {
        let h = heartbeats(out);
        assert_eq!(h.len(), 1, "expected one heartbeat in {out:?}");
        h[0]
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

    fn owned_of(h: &ConsumerGroupHeartbeatRequest) -> Option<Vec<(uuid::Uuid, Vec<i32>)>> {
        h.topic_partitions.as_ref().map(|tps| {
            tps.iter()
                .map(|t| (t.topic_id, t.partitions.clone()))
                .collect()
        })
    }

    /// A heartbeat answer: epoch, interval 5 s, and optionally an assignment of t0 partitions.
    fn resp(epoch: i32, t0: Option<&[i32]>) -> Response {
        let mut r = ConsumerGroupHeartbeatResponse::default()
            .with_member_epoch(epoch)
            .with_heartbeat_interval_ms(5000);
        if let Some(ps) = t0 {
            r = r.with_assignment(Some(Assignment::default().with_topic_partitions(vec![
                RespTopic::default()
                    .with_topic_id(T0)
                    .with_partitions(ps.to_vec()),
            ])));
        }
        Response::ConsumerGroupHeartbeat(r)
    }

    fn err_resp(code: i16) -> Response {
        Response::ConsumerGroupHeartbeat(
            ConsumerGroupHeartbeatResponse::default()
                .with_error_code(code)
                .with_member_epoch(-1),
        )
    }

    /// Join at 0, get epoch 1 with t0 [0, 1] at 1000, ack answered at 2000: stable.
    fn stable_member(env: &Env) -> ConsumerMember {
        let cx = env.cx();
        let mut m = ConsumerMember::new(7);
        let mut out = Vec::new();
        m.start(&cx, 0, &mut out);
        out.clear();
        m.on_response(&cx, resp(1, Some(&[0, 1])), 1000, &mut out);
        out.clear();
        m.on_response(&cx, resp(1, None), 2000, &mut out);
        assert!(m.is_stable());
        m
    }

    #[test]
    fn joins_with_epoch_zero_a_client_made_id_and_every_field() {
        let env = Env::new();
        let cx = env.cx();
        let mut m = ConsumerMember::new(1);
        let mut out = Vec::new();
        m.start(&cx, 0, &mut out);
        let j = only_hb(&out);
        assert_eq!(j.group_id.0.as_str(), "g");
        assert_eq!(j.member_epoch, 0);
        assert_eq!(j.member_id.len(), MEMBER_ID_LEN);
        assert!(j
            .member_id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_'));
        assert_eq!(j.rebalance_timeout_ms, 60_000);
        let names: Vec<&str> = j
            .subscribed_topic_names
            .as_ref()
            .unwrap()
            .iter()
            .map(|t| t.0.as_str())
            .collect();
        assert_eq!(names, vec!["t0", "t1"]);
        assert_eq!(j.topic_partitions, Some(vec![]), "empty, not null");
        assert_eq!(j.subscribed_topic_regex, None);
        assert_eq!(j.server_assignor, None);
        assert_eq!(m.phase(), Phase::Joining);
        assert!(!m.is_stable());
        // Two members get different ids.
        let mut other = ConsumerMember::new(2);
        let mut out2 = Vec::new();
        other.start(&cx, 0, &mut out2);
        assert_ne!(only_hb(&out2).member_id, j.member_id);
    }

    #[test]
    fn takes_the_assignment_acks_it_at_once_then_heartbeats_on_the_broker_interval() {
        let env = Env::new();
        let cx = env.cx();
        let mut m = ConsumerMember::new(1);
        let mut out = Vec::new();
        m.start(&cx, 100, &mut out);
        let id = m.member_id().to_string();
        out.clear();
        m.on_response(&cx, resp(3, Some(&[2, 0])), 1_100, &mut out);
        assert_eq!(m.member_epoch(), 3);
        assert_eq!(m.owned(), &[(0, 0), (0, 2)]);
        assert!(!m.is_stable(), "not stable until acknowledged");
        // OffsetFetch first (with the epoch the broker has now), then the acknowledging heartbeat.
        let s = sends(&out);
        assert_eq!(s.len(), 2, "{out:?}");
        let Request::OffsetFetch(f) = s[0] else {
            panic!("{out:?}")
        };
        assert_eq!(f.groups[0].member_id.as_deref(), Some(id.as_str()));
        assert_eq!(f.groups[0].member_epoch, 3);
        assert_eq!(
            f.groups[0].topics.as_ref().unwrap()[0].partition_indexes,
            vec![0, 2]
        );
        let Request::ConsumerGroupHeartbeat(ack) = s[1] else {
            panic!("{out:?}")
        };
        assert_eq!(ack.member_epoch, 3);
        assert_eq!(ack.member_id.as_str(), id);
        assert_eq!(owned_of(ack), Some(vec![(T0, vec![0, 2])]));
        assert_eq!(
            ack.subscribed_topic_names, None,
            "unchanged fields are null"
        );
        assert_eq!(ack.rebalance_timeout_ms, -1);
        let c = timer(&out, TimerKind::Commit).unwrap();
        assert!(c > 1_100 && c <= 1_100 + COMMIT);

        // The ack's answer: nothing new → stable; convergence from the join start.
        out.clear();
        m.on_response(&cx, resp(3, None), 1_600, &mut out);
        assert!(m.is_stable());
        assert!(out.contains(&Action::Stable {
            convergence_us: 1_500
        }));
        // Next heartbeat an interval (the broker's 5 s) after the ack was sent.
        assert_eq!(timer(&out, TimerKind::Heartbeat), Some(1_100 + 5_000_000));
        assert!(sends(&out).is_empty());

        // A regular heartbeat carries only the id and epoch.
        out.clear();
        m.on_timer(&cx, TimerKind::Heartbeat, 5_001_100, &mut out);
        let h = only_hb(&out);
        assert_eq!((h.member_epoch, h.topic_partitions.is_none()), (3, true));
        assert_eq!(h.subscribed_topic_names, None);
        // A heartbeat in flight blocks another.
        out.clear();
        m.on_timer(&cx, TimerKind::Heartbeat, 5_001_200, &mut out);
        assert!(out.is_empty());
        // An epoch bump without an assignment change keeps it stable and records nothing.
        m.on_response(&cx, resp(4, None), 5_002_000, &mut out);
        assert!(m.is_stable());
        assert!(!out.iter().any(|a| matches!(a, Action::Stable { .. })));
        assert_eq!(m.member_epoch(), 4);
    }

    /// A heartbeat answer like `resp`, with the broker's interval `ms`.
    fn resp_interval(epoch: i32, t0: Option<&[i32]>, ms: i32) -> Response {
        let Response::ConsumerGroupHeartbeat(r) = resp(epoch, t0) else {
            unreachable!()
        };
        Response::ConsumerGroupHeartbeat(r.with_heartbeat_interval_ms(ms))
    }

    #[test]
    fn follows_the_interval_of_every_response() {
        let env = Env::new();
        let cx = env.cx();
        let mut m = stable_member(&env);
        let mut out = Vec::new();
        // Stable at 5 s; a heartbeat at 5 s is answered with a revocation and 100 ms.
        m.on_timer(&cx, TimerKind::Heartbeat, 5_000_000, &mut out);
        out.clear();
        m.on_response(&cx, resp_interval(1, Some(&[1]), 100), 5_000_500, &mut out);
        // The acknowledgement goes at once; its answer (still reconciling: 100 ms) sets the next
        // heartbeat 100 ms after the ack was sent.
        assert_eq!(owned_of(only_hb(&out)), Some(vec![(T0, vec![1])]));
        out.clear();
        m.on_response(&cx, resp_interval(1, None, 100), 5_001_000, &mut out);
        assert_eq!(timer(&out, TimerKind::Heartbeat), Some(5_100_500));
        out.clear();
        m.on_timer(&cx, TimerKind::Heartbeat, 5_100_500, &mut out);
        assert!(only_hb(&out).topic_partitions.is_none());
        out.clear();
        m.on_response(&cx, resp_interval(2, None, 100), 5_101_000, &mut out);
        assert_eq!(timer(&out, TimerKind::Heartbeat), Some(5_200_500));
        // Back to 5 s: from the response that changed it, as the Java client restarts its timer.
        out.clear();
        m.on_timer(&cx, TimerKind::Heartbeat, 5_200_500, &mut out);
        out.clear();
        m.on_response(&cx, resp_interval(2, None, 5000), 5_201_000, &mut out);
        let at = timer(&out, TimerKind::Heartbeat).unwrap();
        assert_eq!(at, 10_201_000);
        // And then every 5 s after the one sent.
        out.clear();
        m.on_timer(&cx, TimerKind::Heartbeat, at, &mut out);
        out.clear();
        m.on_response(&cx, resp_interval(2, None, 5000), at + 400, &mut out);
        assert_eq!(timer(&out, TimerKind::Heartbeat), Some(at + 5_000_000));
    }

    #[test]
    fn the_flag_overrides_the_broker_interval() {
        let mut env = Env::new();
        env.cfg.heartbeat_interval_override_us = Some(60_000_000);
        let cx = env.cx();
        let mut m = stable_member(&env);
        let mut out = Vec::new();
        m.on_timer(&cx, TimerKind::Heartbeat, 10_000_000, &mut out);
        out.clear();
        m.on_response(&cx, resp(1, None), 10_000_500, &mut out);
        assert_eq!(timer(&out, TimerKind::Heartbeat), Some(70_000_000));
    }

    #[test]
    fn revokes_at_once_and_acks_right_away() {
        let env = Env::new();
        let cx = env.cx();
        let mut m = stable_member(&env);
        let mut out = Vec::new();
        m.on_timer(&cx, TimerKind::Heartbeat, 5_000_000, &mut out);
        out.clear();
        // The broker takes partition 0 away (same epoch: UNREVOKED_PARTITIONS).
        m.on_response(&cx, resp(1, Some(&[1])), 5_000_500, &mut out);
        assert_eq!(
            m.owned(),
            &[(0, 1)],
            "revoked partitions are dropped at once"
        );
        assert!(!m.is_stable());
        let ack = only_hb(&out);
        assert_eq!(owned_of(ack), Some(vec![(T0, vec![1])]));
        assert_eq!(ack.member_epoch, 1);
        assert_eq!(timer(&out, TimerKind::Heartbeat), None);
        // The broker moves it to epoch 2: stable again (not a convergence sample).
        out.clear();
        m.on_response(&cx, resp(2, None), 5_001_000, &mut out);
        assert!(m.is_stable());
        assert!(!out.iter().any(|a| matches!(a, Action::Stable { .. })));
        // Later it gets partitions added (and keeps offsets of the kept one).
        out.clear();
        m.on_timer(&cx, TimerKind::Heartbeat, 10_000_000, &mut out);
        out.clear();
        m.on_response(&cx, resp(2, Some(&[1, 3])), 10_000_500, &mut out);
        assert_eq!(m.owned(), &[(0, 1), (0, 3)]);
        assert_eq!(owned_of(only_hb(&out)), Some(vec![(T0, vec![1, 3])]));
        // No second OffsetFetch after the first assignment.
        assert_eq!(sends(&out).len(), 1);
    }

    #[test]
    fn an_empty_assignment_is_stable_after_one_quiet_heartbeat() {
        let env = Env::new();
        let cx = env.cx();
        let mut m = ConsumerMember::new(1);
        let mut out = Vec::new();
        m.start(&cx, 0, &mut out);
        out.clear();
        m.on_response(&cx, resp(5, Some(&[])), 1000, &mut out);
        assert!(!m.is_stable());
        assert!(sends(&out).is_empty(), "nothing to ack or fetch");
        // The first interval the broker gave, from its response (the Java client's timer).
        let at = timer(&out, TimerKind::Heartbeat).unwrap();
        assert_eq!(at, 1000 + 5_000_000);
        out.clear();
        m.on_timer(&cx, TimerKind::Heartbeat, at, &mut out);
        assert_eq!(only_hb(&out).topic_partitions, None);
        out.clear();
        m.on_response(&cx, resp(5, None), at + 300, &mut out);
        assert!(m.is_stable());
        assert!(out.contains(&Action::Stable {
            convergence_us: at + 300
        }));
    }

    #[test]
    fn with_an_expected_share_only_that_share_is_stable() {
        let mut env = Env::new();
        env.cfg.expect_partitions = Some(2);
        let cx = env.cx();
        let mut m = ConsumerMember::new(1);
        let mut out = Vec::new();
        m.start(&cx, 0, &mut out);
        out.clear();
        // Nothing yet (the partitions are still another member's), short intervals: a quiet
        // heartbeat is not the end of it.
        m.on_response(&cx, resp_interval(5, Some(&[]), 100), 1000, &mut out);
        out.clear();
        m.on_timer(&cx, TimerKind::Heartbeat, 101_000, &mut out);
        out.clear();
        m.on_response(&cx, resp_interval(5, None, 100), 101_500, &mut out);
        assert!(!m.is_stable(), "owns nothing of its share yet");
        // One of two: acknowledged, still not its share.
        m.on_timer(&cx, TimerKind::Heartbeat, 201_000, &mut out);
        out.clear();
        m.on_response(&cx, resp_interval(5, Some(&[1]), 100), 201_500, &mut out);
        out.clear();
        m.on_response(&cx, resp_interval(5, None, 100), 202_000, &mut out);
        assert!(!m.is_stable());
        // Both: stable once acknowledged; convergence from the join.
        m.on_timer(&cx, TimerKind::Heartbeat, 301_500, &mut out);
        out.clear();
        m.on_response(&cx, resp_interval(5, Some(&[1, 2]), 100), 302_000, &mut out);
        assert!(!m.is_stable());
        out.clear();
        m.on_response(&cx, resp_interval(5, None, 5000), 302_500, &mut out);
        assert!(m.is_stable());
        assert!(out.contains(&Action::Stable {
            convergence_us: 302_500
        }));
    }

    #[test]
    fn fenced_or_unknown_rejoins_with_epoch_zero_and_the_same_id() {
        for fence in [
            ResponseError::FencedMemberEpoch.code(),
            ResponseError::UnknownMemberId.code(),
        ] {
            let env = Env::new();
            let cx = env.cx();
            let mut m = stable_member(&env);
            let id = m.member_id().to_string();
            let epoch = m.epoch();
            let mut out = Vec::new();
            m.on_timer(&cx, TimerKind::Heartbeat, 5_000_000, &mut out);
            out.clear();
            m.on_response(&cx, err_resp(fence), 5_000_100, &mut out);
            assert_eq!(errors(&out), vec![(Api::ConsumerGroupHeartbeat, fence)]);
            let j = only_hb(&out);
            assert_eq!(j.member_epoch, 0);
            assert_eq!(j.member_id.as_str(), id);
            assert_eq!(j.topic_partitions, Some(vec![]));
            assert!(j.subscribed_topic_names.is_some());
            assert!(m.owned().is_empty());
            assert!(!m.is_stable());
            assert_ne!(m.epoch(), epoch, "old timers and responses are stale");
            // Converges again, counted from the rejoin.
            out.clear();
            m.on_response(&cx, resp(7, Some(&[3])), 5_001_100, &mut out);
            out.clear();
            m.on_response(&cx, resp(7, None), 5_002_100, &mut out);
            assert!(out.contains(&Action::Stable {
                convergence_us: 2_000
            }));
        }
    }

    #[test]
    fn coordinator_errors_and_lost_heartbeats_back_off_then_send_everything() {
        let env = Env::new();
        let cx = env.cx();
        let mut m = stable_member(&env);
        let mut out = Vec::new();
        m.on_timer(&cx, TimerKind::Heartbeat, 5_000_000, &mut out);
        out.clear();
        m.on_response(
            &cx,
            err_resp(ResponseError::CoordinatorNotAvailable.code()),
            5_000_100,
            &mut out,
        );
        assert_eq!(
            errors(&out),
            vec![(
                Api::ConsumerGroupHeartbeat,
                ResponseError::CoordinatorNotAvailable.code()
            )]
        );
        let at = timer(&out, TimerKind::Heartbeat).unwrap();
        assert_eq!(at, 5_000_100 + env.cfg.retry_backoff_us);
        out.clear();
        m.on_timer(&cx, TimerKind::Heartbeat, at, &mut out);
        let h = only_hb(&out);
        assert_eq!(h.member_epoch, 1);
        assert_eq!(owned_of(h), Some(vec![(T0, vec![0, 1])]));
        assert!(h.subscribed_topic_names.is_some());
        // Lost: the same.
        out.clear();
        m.on_lost(&cx, Api::ConsumerGroupHeartbeat, at + 10, &mut out);
        let at2 = timer(&out, TimerKind::Heartbeat).unwrap();
        out.clear();
        m.on_timer(&cx, TimerKind::Heartbeat, at2, &mut out);
        assert!(only_hb(&out).subscribed_topic_names.is_some());

        // A lost join is retried (epoch 0, same id) after the backoff.
        let mut j = ConsumerMember::new(3);
        out.clear();
        j.start(&cx, 0, &mut out);
        let id = j.member_id().to_string();
        out.clear();
        j.on_lost(&cx, Api::ConsumerGroupHeartbeat, 50, &mut out);
        assert_eq!(j.phase(), Phase::Backoff);
        let at = timer(&out, TimerKind::Retry).unwrap();
        out.clear();
        j.on_timer(&cx, TimerKind::Retry, at, &mut out);
        let h = only_hb(&out);
        assert_eq!((h.member_epoch, h.member_id.as_str()), (0, id.as_str()));
    }

    #[test]
    fn commits_with_the_epoch_and_never_while_a_heartbeat_is_in_flight() {
        let env = Env::new();
        let cx = env.cx();
        let mut m = stable_member(&env);
        let mut out = Vec::new();
        m.on_timer(&cx, TimerKind::Commit, 4_000_000, &mut out);
        let s = sends(&out);
        let Request::OffsetCommit(c) = s[0] else {
            panic!("{out:?}")
        };
        assert_eq!(c.generation_id_or_member_epoch, 1);
        assert_eq!(c.member_id.as_str(), m.member_id());
        let parts: Vec<(i32, i64)> = c.topics[0]
            .partitions
            .iter()
            .map(|p| (p.partition_index, p.committed_offset))
            .collect();
        assert_eq!(parts, vec![(0, 10), (1, 10)]);
        out.clear();
        let ok =
            OffsetCommitResponse::default().with_topics(vec![OffsetCommitResponseTopic::default()
                .with_name(TopicName(StrBytes::from_static_str("t0")))
                .with_partitions(vec![OffsetCommitResponsePartition::default()])]);
        m.on_response(&cx, Response::OffsetCommit(ok), 4_000_500, &mut out);
        assert!(errors(&out).is_empty());
        assert_eq!(timer(&out, TimerKind::Commit), Some(4_000_000 + COMMIT));

        // Due while a heartbeat is in flight: sent after its answer, before any ack.
        out.clear();
        m.on_timer(&cx, TimerKind::Heartbeat, 9_000_000, &mut out);
        out.clear();
        m.on_timer(&cx, TimerKind::Commit, 9_000_001, &mut out);
        assert!(out.is_empty());
        m.on_response(&cx, resp(2, Some(&[1])), 9_000_100, &mut out);
        let s = sends(&out);
        assert_eq!(s.len(), 2, "{out:?}");
        let Request::OffsetCommit(c) = s[0] else {
            panic!("{out:?}")
        };
        assert_eq!(c.generation_id_or_member_epoch, 2);
        assert_eq!(c.topics[0].partitions.len(), 1, "only what it still owns");
        assert!(matches!(s[1], Request::ConsumerGroupHeartbeat(_)));
    }

    #[test]
    fn churn_leaves_with_epoch_minus_one_and_rejoins_as_a_new_member() {
        let env = Env::new();
        let cx = env.cx();
        let mut m = stable_member(&env);
        let old = m.member_id().to_string();
        let mut out = Vec::new();
        assert!(m.churn(&cx, 6_000_000, &mut out));
        let l = only_hb(&out);
        assert_eq!(l.member_epoch, LEAVE_EPOCH);
        assert_eq!(l.member_id.as_str(), old);
        assert_eq!(l.topic_partitions, None);
        assert!(!m.is_stable());
        out.clear();
        assert!(
            !m.churn(&cx, 6_000_001, &mut out),
            "only stable members churn"
        );
        m.on_response(&cx, resp(-1, None), 6_000_500, &mut out);
        let j = only_hb(&out);
        assert_eq!(j.member_epoch, 0);
        assert_ne!(j.member_id.as_str(), old, "a new member");
        assert!(errors(&out).is_empty());
    }

    #[test]
    fn shutdown_leaves_and_stops() {
        let env = Env::new();
        let cx = env.cx();
        let mut m = stable_member(&env);
        let mut out = Vec::new();
        m.shutdown(&cx, true, 9_000_000, &mut out);
        assert_eq!(only_hb(&out).member_epoch, LEAVE_EPOCH);
        assert!(!m.is_done());
        out.clear();
        m.on_response(&cx, resp(-1, None), 9_000_500, &mut out);
        assert!(m.is_done());
        assert!(out.is_empty());
        assert!(m.owned_partitions().is_empty());

        // A failed leave is an error, and the member still stops.
        let mut m = stable_member(&env);
        m.shutdown(&cx, true, 9_000_000, &mut out);
        out.clear();
        m.on_response(
            &cx,
            err_resp(ResponseError::UnknownMemberId.code()),
            9_000_500,
            &mut out,
        );
        assert_eq!(
            errors(&out),
            vec![(
                Api::ConsumerGroupHeartbeat,
                ResponseError::UnknownMemberId.code()
            )]
        );
        assert!(m.is_done());

        // Without leaving: just stops.
        let mut m = stable_member(&env);
        out.clear();
        m.shutdown(&cx, false, 9_000_000, &mut out);
        assert!(m.is_done() && out.is_empty());
    }

    #[test]
    fn unknown_topic_ids_are_bad_responses() {
        let env = Env::new();
        let cx = env.cx();
        let mut m = ConsumerMember::new(1);
        let mut out = Vec::new();
        m.start(&cx, 0, &mut out);
        out.clear();
        let r = ConsumerGroupHeartbeatResponse::default()
            .with_member_epoch(1)
            .with_assignment(Some(Assignment::default().with_topic_partitions(vec![
                RespTopic::default()
                    .with_topic_id(uuid::Uuid::from_u128(9))
                    .with_partitions(vec![0]),
            ])));
        m.on_response(&cx, Response::ConsumerGroupHeartbeat(r), 10, &mut out);
        assert_eq!(
            errors(&out),
            vec![(Api::ConsumerGroupHeartbeat, client_error::BAD_RESPONSE)]
        );
    }

    #[test]
    fn requests_encode_at_every_version_used() {
        let env = Env::new();
        let cx = env.cx();
        let mut m = ConsumerMember::new(1);
        let mut out = Vec::new();
        m.start(&cx, 0, &mut out);
        m.on_response(&cx, resp(1, Some(&[0, 1])), 10, &mut out);
        m.on_response(&cx, resp(1, None), 15, &mut out);
        m.on_timer(&cx, TimerKind::Commit, 20, &mut out);
        m.shutdown(&cx, true, 30, &mut out);
        let mut seen = 0;
        for r in sends(&out) {
            let api = Api::from_key(r.api_key()).unwrap();
            let versions: Vec<i16> = match api {
                Api::ConsumerGroupHeartbeat => vec![0, 1],
                _ => vec![9],
            };
            for v in versions {
                let mut buf = BytesMut::new();
                crate::net::encode_frame(&mut buf, api.key(), v, 9, "t", r)
                    .unwrap_or_else(|e| panic!("{} v{v}: {e}", api.name()));
                let table = wire::Versions::new(&[wire::ApiRange {
                    api_key: api.key(),
                    min: 0,
                    max: v,
                }]);
                let (_, back) = wire::decode_request(&buf.split_off(4).freeze(), &table)
                    .unwrap_or_else(|e| panic!("{} v{v}: {e:?}", api.name()));
                assert_eq!(&back, r, "{} v{v}", api.name());
                seen += 1;
            }
        }
        assert_eq!(
            seen, 8,
            "join, ack, leave at v0 and v1; fetch, commit at v9"
        );
    }
}
