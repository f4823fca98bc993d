//! Committed offsets: OffsetCommit, OffsetFetch, OffsetDelete and expiry
//! (`OffsetMetadataManager`, `ClassicGroup.validateOffsetCommit`, reference §5.5.11 and §4).

use super::classic::{self, ClassicGroup, State};
use super::{err, Coordinator, FetchedOffsets, Output, RequestContext};
use kafka_protocol::messages::offset_commit_response::{
    OffsetCommitResponsePartition, OffsetCommitResponseTopic,
};
use kafka_protocol::messages::offset_delete_response::{
    OffsetDeleteResponsePartition, OffsetDeleteResponseTopic,
};
use kafka_protocol::messages::*;
use kafka_protocol::ResponseError;
use wire::records::{OffsetCommitValue, Record, RecordKey, RecordValue};

pub use super::offset_store::{OffsetStore, PairId, StoredOffset};

/// Java `String.length()`: UTF-16 code units, which is what `offset.metadata.max.bytes` counts.
pub(super) fn java_len(s: &str) -> usize {
    s.encode_utf16().count()
}

/// Group-level validation of a commit (`validateOffsetCommit`); Ok(member to touch).
fn validate_commit(
    c: &mut Coordinator,
    r: &OffsetCommitRequest,
    ctx: &RequestContext,
    now: i64,
) -> Result<Option<String>, i16> {
    let version = ctx.api_version;
    // An empty group id is a group id like any other here: Kafka refuses only a null one
    // (`GroupCoordinatorService.commitOffsets`).
    let group_id = r.group_id.0.as_str();
    let generation = r.generation_id_or_member_epoch;
    let member_id = r.member_id.as_str();
    let instance_id = r.group_instance_id.as_deref();
    if let Some(g) = c.consumer_groups.get(group_id) {
        // `ConsumerGroup.validateOffsetCommit`: an admin commit (no member, epoch < 0) only to
        // an empty group; a member must be known, commit with v9+, and carry its current epoch.
        if generation < 0 && member_id.is_empty() {
            return if g.members.is_empty() {
                Ok(None)
            } else {
                Err(err(ResponseError::UnknownMemberId))
            };
        }
        let Some(m) = g.members.get(member_id) else {
            return Err(err(ResponseError::UnknownMemberId));
        };
        // A classic member (online migration) commits with its generation at any version, and
        // is told ILLEGAL_GENERATION where a consumer-protocol member hears STALE_MEMBER_EPOCH.
        if version < 9 && !m.uses_classic() {
            return Err(err(ResponseError::UnsupportedVersion));
        }
        let stale = if m.uses_classic() {
            err(ResponseError::IllegalGeneration)
        } else {
            err(ResponseError::StaleMemberEpoch)
        };
        // Kafka 4.3+ (`ConsumerGroup.validateOffsetCommit`, `createAssignmentEpochValidator`):
        // the current epoch commits anything; a newer one nothing; an older one only
        // partitions the member already held at that epoch (assigned or pending revocation), so
        // a member just moved to a new epoch is not fenced for a commit sent before it knew.
        // One partition failing fails the whole request, as in Kafka.
        if generation > m.member_epoch {
            return Err(stale);
        }
        if generation < m.member_epoch {
            for t in &r.topics {
                let Some(topic) = ctx.topics.get(t.name.0.as_str()) else {
                    return Err(stale);
                };
                for p in &t.partitions {
                    match m.assignment_epoch(&topic.id, p.partition_index) {
                        Some(e) if e <= generation => {}
                        _ => return Err(stale),
                    }
                }
            }
        }
        return Ok(None);
    }
    let Some(g) = c.groups.get(group_id) else {
        if generation < 0 {
            // A standalone commit creates an empty "simple" group (`getOrMaybeCreateGroup`).
            let mut g = ClassicGroup::empty(group_id, now);
            g.protocol_type = None;
            c.groups.insert(group_id.to_string(), g);
            return Ok(None);
        }
        return Err(if version >= 9 {
            err(ResponseError::GroupIdNotFound)
        } else {
            err(ResponseError::IllegalGeneration)
        });
    };
    if g.state == State::Dead {
        return Err(err(ResponseError::CoordinatorNotAvailable));
    }
    if generation < 0 && g.state == State::Empty {
        return Ok(None);
    }
    let mut touch = None;
    if generation >= 0 || !member_id.is_empty() || instance_id.is_some() {
        g.validate_member_pub(member_id, instance_id)?;
        if generation != g.generation {
            return Err(err(ResponseError::IllegalGeneration));
        }
        touch = Some(member_id.to_string());
    } else if g.state != State::Empty {
        return Err(err(ResponseError::UnknownMemberId));
    }
    if g.state == State::CompletingRebalance {
        return Err(err(ResponseError::RebalanceInProgress));
    }
    Ok(touch)
}

/// OffsetCommit v2–v9 for one group.
pub fn commit(
    c: &mut Coordinator,
    ctx: &RequestContext,
    r: OffsetCommitRequest,
    now: i64,
    out: &mut Output,
) -> OffsetCommitResponse {
    let version = ctx.api_version;
    let group_error = match validate_commit(c, &r, ctx, now) {
        Ok(touch) => {
            if let Some(m) = touch {
                classic::touch_member(c, r.group_id.0.as_str(), &m, now);
            }
            None
        }
        Err(code) => Some(code),
    };
    let group_id = r.group_id.0.to_string();
    let max_metadata = c.config.offset_metadata_max_bytes.max(0) as usize;
    // v2–v4 may ask for an explicit retention; Kafka stores it as an expire timestamp (value v1).
    let expire = if (2..=4).contains(&version) && r.retention_time_ms != -1 {
        now + r.retention_time_ms
    } else {
        -1
    };
    let mut resp = OffsetCommitResponse::default();
    for t in r.topics {
        let topic = t.name.0.to_string();
        let known = ctx.topics.get(&topic).map(|x| x.partitions);
        // Kafka 4.4 stores the topic's id with every commit (tagged field 0 of the value),
        // whichever request version named the topic.
        let topic_id = ctx.topics.get(&topic).map_or(uuid::Uuid::nil(), |x| x.id);
        let mut rt = OffsetCommitResponseTopic::default().with_name(t.name.clone());
        for p in t.partitions {
            let metadata = p
                .committed_metadata
                .as_ref()
                .map(|m| m.to_string())
                .unwrap_or_default();
            let code = if let Some(code) = group_error {
                code
            } else if !known.is_some_and(|n| p.partition_index >= 0 && p.partition_index < n) {
                err(ResponseError::UnknownTopicOrPartition)
            } else if java_len(&metadata) > max_metadata {
                err(ResponseError::OffsetMetadataTooLarge)
            } else {
                let value = OffsetCommitValue {
                    offset: p.committed_offset,
                    leader_epoch: p.committed_leader_epoch,
                    metadata,
                    commit_timestamp: now,
                    expire_timestamp: expire,
                    topic_id,
                };
                let key = RecordKey::OffsetCommit {
                    group: group_id.clone(),
                    topic: topic.clone(),
                    partition: p.partition_index,
                };
                c.apply(
                    Record {
                        key,
                        value: Some(RecordValue::OffsetCommit(value)),
                    },
                    out,
                );
                0
            };
            rt.partitions.push(
                OffsetCommitResponsePartition::default()
                    .with_partition_index(p.partition_index)
                    .with_error_code(code),
            );
        }
        resp.topics.push(rt);
    }
    resp
}

/// OffsetFetch for one group. An unknown group has no offsets (-1), not an error, unless a
/// KIP-848 member epoch was given (then GROUP_ID_NOT_FOUND). With `require_stable`, a partition
/// with a pending transactional offset answers UNSTABLE_OFFSET_COMMIT (offset -1), per
/// partition at every version (`OffsetMetadataManager.fetchOffsets` / `fetchAllOffsets`); the
/// committed value is returned otherwise.
pub fn fetch(
    c: &Coordinator,
    group: &str,
    topics: Option<Vec<(String, Vec<i32>)>>,
    member_id: Option<&str>,
    member_epoch: i32,
    require_stable: bool,
) -> FetchedOffsets {
    let unstable =
        |t: &str, p: i32| require_stable && !c.txn.is_empty() && c.txn.has_pending(group, t, p);
    let unstable_entry = |t: &str, p: i32| {
        (
            t.to_string(),
            p,
            -1,
            -1,
            String::new(),
            err(ResponseError::UnstableOffsetCommit),
        )
    };
    // An unknown group (or "", which Kafka takes as a group id like any other) is no error:
    // its partitions come back without offsets (`OffsetMetadataManager.fetchOffsets` fails
    // only all partitions when `validateOffsetFetch` finds no group).
    let mut outp = FetchedOffsets::default();
    if let Some(g) = c.consumer_groups.get(group) {
        // `ConsumerGroup.validateOffsetFetch`: a member id or an epoch names a member, which
        // must be current.
        if member_id.is_some() || member_epoch >= 0 {
            match g.members.get(member_id.unwrap_or_default()) {
                None => {
                    outp.error_code = err(ResponseError::UnknownMemberId);
                    return outp;
                }
                Some(m) if m.member_epoch != member_epoch => {
                    outp.error_code = if m.uses_classic() {
                        err(ResponseError::IllegalGeneration)
                    } else {
                        err(ResponseError::StaleMemberEpoch)
                    };
                    return outp;
                }
                Some(_) => {}
            }
        }
    }
    match topics {
        None => {
            for (t, p, v) in c.offsets.of_group(group) {
                if unstable(t, p) {
                    outp.partitions.push(unstable_entry(t, p));
                    continue;
                }
                outp.partitions.push((
                    t.to_string(),
                    p,
                    v.offset,
                    v.leader_epoch,
                    v.metadata.to_string(),
                    0,
                ));
            }
        }
        Some(ts) => {
            for (t, parts) in ts {
                for p in parts {
                    if unstable(&t, p) {
                        outp.partitions.push(unstable_entry(&t, p));
                        continue;
                    }
                    match c.offsets.get(group, &t, p) {
                        Some(v) => outp.partitions.push((
                            t.clone(),
                            p,
                            v.offset,
                            v.leader_epoch,
                            v.metadata.to_string(),
                            0,
                        )),
                        None => outp
                            .partitions
                            .push((t.clone(), p, -1, -1, String::new(), 0)),
                    }
                }
            }
        }
    }
    outp
}

/// OffsetDelete v0 (`GMM.validateDeleteOffsets`, `OffsetMetadataManager.deleteOffsets`).
pub fn delete(
    c: &mut Coordinator,
    ctx: &RequestContext,
    r: OffsetDeleteRequest,
    out: &mut Output,
) -> OffsetDeleteResponse {
    let group_id = r.group_id.0.to_string();
    let mut resp = OffsetDeleteResponse::default();
    if group_id.is_empty() {
        resp.error_code = err(ResponseError::InvalidGroupId);
        return resp;
    }
    if let Some(g) = c.consumer_groups.get(&group_id) {
        let subscribed = if g.members.is_empty() {
            None
        } else {
            Some(g.subscribed_topics())
        };
        return delete_partitions(c, ctx, &group_id, subscribed, r.topics, out, resp);
    }
    let Some(g) = c.groups.get(&group_id).filter(|g| g.state != State::Dead) else {
        resp.error_code = err(ResponseError::GroupIdNotFound);
        return resp;
    };
    // A non-empty group that does not use the consumer protocol cannot say which topics it
    // reads, so deleting its offsets is refused outright.
    if g.state != State::Empty && g.protocol_type.as_deref() != Some("consumer") {
        resp.error_code = err(ResponseError::NonEmptyGroup);
        return resp;
    }
    let subscribed = if g.state == State::Empty {
        None
    } else {
        g.subscribed_topics.clone()
    };
    delete_partitions(c, ctx, &group_id, subscribed, r.topics, out, resp)
}

/// Delete the requested offsets of a group, refusing topics it still subscribes to.
fn delete_partitions(
    c: &mut Coordinator,
    ctx: &RequestContext,
    group_id: &str,
    subscribed: Option<std::collections::BTreeSet<String>>,
    topics: Vec<kafka_protocol::messages::offset_delete_request::OffsetDeleteRequestTopic>,
    out: &mut Output,
    mut resp: OffsetDeleteResponse,
) -> OffsetDeleteResponse {
    let group_id = group_id.to_string();
    for t in topics {
        let topic = t.name.0.to_string();
        let known = ctx.topics.get(&topic).map(|x| x.partitions);
        let mut rt = OffsetDeleteResponseTopic::default().with_name(t.name.clone());
        for p in t.partitions {
            // Partitions the broker does not have are refused before the coordinator sees them
            // (`KafkaApis.handleOffsetDeleteRequest` checks the metadata cache first).
            let code = if !known.is_some_and(|n| p.partition_index >= 0 && p.partition_index < n) {
                err(ResponseError::UnknownTopicOrPartition)
            } else if subscribed.as_ref().is_some_and(|s| s.contains(&topic)) {
                err(ResponseError::GroupSubscribedToTopic)
            } else {
                // A pending transactional offset is tombstoned too (`deleteOffsets`).
                if c.offsets
                    .get(&group_id, &topic, p.partition_index)
                    .is_some()
                    || c.txn.has_pending(&group_id, &topic, p.partition_index)
                {
                    let key = RecordKey::OffsetCommit {
                        group: group_id.clone(),
                        topic: topic.clone(),
                        partition: p.partition_index,
                    };
                    c.apply(Record { key, value: None }, out);
                }
                0
            };
            rt.partitions.push(
                OffsetDeleteResponsePartition::default()
                    .with_partition_index(p.partition_index)
                    .with_error_code(code),
            );
        }
        resp.topics.push(rt);
    }
    resp
}

/// Offset expiry (`OffsetMetadataManager.cleanupExpiredOffsets`, `offsets.retention.minutes`):
/// - an explicit expire timestamp (commits v2–v4 with a retention) wins;
/// - a group using the consumer protocol with known subscriptions keeps offsets of subscribed
///   topics while it has members; unsubscribed ones expire `retention` after their commit;
/// - an Empty group's offsets expire `retention` after it became empty;
/// - a standalone group (no protocol) expires each offset `retention` after its commit.
///
/// An Empty group left with no offsets is deleted (GroupMetadata tombstone). An offset with a
/// pending transactional offset on its partition does not expire, and a group with an open
/// transaction is not deleted (`cleanupExpiredOffsets`).
pub fn expire(c: &mut Coordinator, now: i64, out: &mut Output) {
    let retention = c.config.offsets_retention_ms;
    let mut tombstones = Vec::new();
    for group in c.offsets.group_ids() {
        let g = c.groups.get(&group);
        // A consumer group keeps the offsets of topics its members subscribe to; the rest (and
        // all of an empty group's) expire `retention` after their commit.
        let consumer_subs = c
            .consumer_groups
            .get(&group)
            .map(|cg| cg.subscribed_topics());
        for (topic, partition, v) in c.offsets.of_group(&group) {
            let expired = if v.expire_timestamp != -1 {
                now >= v.expire_timestamp
            } else if let Some(subs) = &consumer_subs {
                !subs.contains(topic) && now >= v.commit_timestamp + retention
            } else {
                match g {
                    Some(g) if g.state == State::Empty && g.protocol_type.is_some() => {
                        now >= g.state_timestamp + retention
                    }
                    Some(g) if g.state != State::Empty => match &g.subscribed_topics {
                        Some(subs) => {
                            !subs.contains(topic) && now >= v.commit_timestamp + retention
                        }
                        None => false,
                    },
                    _ => now >= v.commit_timestamp + retention,
                }
            };
            if expired && !(c.txn.has_open(&group) && c.txn.has_pending(&group, topic, partition)) {
                tombstones.push(RecordKey::OffsetCommit {
                    group: group.clone(),
                    topic: topic.to_string(),
                    partition,
                });
            }
        }
    }
    for key in tombstones {
        c.apply(Record { key, value: None }, out);
    }
    let empty_groups: Vec<String> = c
        .groups
        .iter()
        .filter(|(id, g)| {
            g.state == State::Empty
                && g.members.is_empty()
                && !c.offsets.has_group(id)
                && !c.txn.has_open(id)
        })
        .map(|(id, _)| id.clone())
        .collect();
    for group in empty_groups {
        c.apply(
            Record {
                key: RecordKey::GroupMetadata { group },
                value: None,
            },
            out,
        );
    }
    let empty_consumer_groups: Vec<String> = c
        .consumer_groups
        .iter()
        .filter(|(id, g)| g.members.is_empty() && !c.offsets.has_group(id) && !c.txn.has_open(id))
        .map(|(id, _)| id.clone())
        .collect();
    for group in empty_consumer_groups {
        super::consumer::delete_empty(c, &group, out);
    }
}
