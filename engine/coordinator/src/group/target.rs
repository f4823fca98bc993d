//! A consumer group's new target assignment in three steps, so that the middle one can leave
//! the request path (Kafka's `group.consumer.assignor.offload.enable`, KIP-1263):
//!
//! 1. [`capture`] (on the coordinator, O(members + previous target)): the group reduced to an
//!    [`AssignSpec`] — subscriptions interned by the list they share, topics numbered — plus
//!    what the result needs to be applied: member ids, instance ids, subscriptions.
//! 2. [`AssignmentJob::run`] (pure, owns its data, `Send`): the assignor, then the packed target
//!    and the record of every member whose target changed.
//! 3. [`apply`] (on the coordinator): the records are written for the members still there with
//!    the subscription they had, then the target metadata at the job's group epoch.
//!
//! A small group does the three at once (`GroupConfig::assignment_offload_min_work`); a large
//! one emits the job in [`Output::jobs`](super::Output) and the shell hands the result back
//! (`PartitionCore::assignment_done`). Meanwhile the group keeps its last target, as Kafka's
//! `maybeUpdateTargetAssignment` returns the last target while an offloaded assignment runs, and
//! no second job starts for it.
//!
//! Applying a result computed at group epoch E when the group has since moved to a later epoch
//! follows the design of Kafka's offloaded assignments (apache/kafka PR 21728, 22488): it
//! is still the target of epoch E, so it is written — for members that left no record, and a
//! static member replaced meanwhile gets its slot's target under its new id — and the next
//! heartbeat after the assignment interval computes epoch E' from it. Discarding it instead
//! could starve a group that keeps changing faster than an assignment takes. A member whose
//! subscription changed since the capture keeps its last target: its change bumped the epoch, so
//! a new target follows. The result is dropped only when the group was deleted, another target
//! was written meanwhile, or the coordinator was reloaded (the job id is checked).

use super::assignor::{self, AssignSpec, PackedAssignment, SpecBuilder, TopicTable};
use super::consumer::{emit, ConsumerGroup, ConsumerMember, STATIC_LEAVE_EPOCH};
use super::{Coordinator, Output};
use crate::topics::TopicsSnapshot;
use std::sync::Arc;
use wire::records::{
    ConsumerGroupTargetAssignmentMemberValue, ConsumerGroupTargetAssignmentMetadataValue, Record,
    RecordKey, RecordValue, TargetTopicPartitions,
};

/// What the members of a captured group subscribed to: the shared topic-name list and the regex.
/// Members compare to it by pointer first (members of a group share one list), then by value.
#[derive(Debug, Clone)]
struct Subscription {
    names: Arc<[String]>,
    regex: Option<String>,
}

impl Subscription {
    fn matches(&self, m: &ConsumerMember) -> bool {
        (Arc::ptr_eq(&self.names, &m.subscribed_topic_names)
            || *self.names == *m.subscribed_topic_names)
            && self.regex == m.subscribed_topic_regex
    }
}

/// The members of a captured group: ids in one buffer (one allocation, not one per member),
/// instance ids of static members, each member's subscription.
#[derive(Debug, Clone, Default)]
struct Members {
    ids: String,
    ends: Vec<u32>,
    statics: Vec<(u32, String)>,
    subscription: Vec<u32>,
    subscriptions: Vec<Subscription>,
}

impl Members {
    fn id(&self, m: u32) -> &str {
        let end = self.ends[m as usize] as usize;
        let start = if m == 0 {
            0
        } else {
            self.ends[m as usize - 1] as usize
        };
        &self.ids[start..end]
    }

    fn instance(&self, m: u32) -> Option<&str> {
        self.statics
            .binary_search_by_key(&m, |(i, _)| *i)
            .ok()
            .map(|i| self.statics[i].1.as_str())
    }
}

/// A captured assignment, ready to run anywhere.
#[derive(Debug)]
pub struct AssignmentJob {
    group: String,
    id: u64,
    group_epoch: i32,
    range: bool,
    spec: AssignSpec,
    members: Members,
}

/// A job's result, to hand back to the coordinator that emitted it.
#[derive(Debug)]
pub struct AssignmentDone {
    group: String,
    id: u64,
    group_epoch: i32,
    members: Members,
    /// Members whose target changed (ascending): the packed target and its record.
    changed: Vec<(u32, PackedAssignment, Record)>,
}

impl AssignmentJob {
    /// The group it assigns.
    pub fn group(&self) -> &str {
        &self.group
    }

    /// How much work it is (see `AssignSpec::work`).
    pub fn work(&self) -> usize {
        self.spec.work()
    }

    pub fn members(&self) -> usize {
        self.spec.members()
    }

    /// Run the assignor and build the records. Pure: the same job gives the same result.
    pub fn run(self) -> AssignmentDone {
        let outcome = if self.range {
            assignor::range(&self.spec)
        } else {
            assignor::uniform(&self.spec)
        };
        let table = self.spec.topics();
        let changed = outcome
            .changed()
            .map(|(m, parts)| {
                let record = Record {
                    key: RecordKey::ConsumerGroupTargetAssignmentMember {
                        group: self.group.clone(),
                        member_id: self.members.id(m).to_string(),
                    },
                    value: Some(RecordValue::ConsumerGroupTargetAssignmentMember(
                        target_value(table, parts),
                    )),
                };
                (m, PackedAssignment::from_globals(table, parts), record)
            })
            .collect();
        AssignmentDone {
            group: self.group,
            id: self.id,
            group_epoch: self.group_epoch,
            members: self.members,
            changed,
        }
    }
}

impl AssignmentDone {
    pub fn group(&self) -> &str {
        &self.group
    }

    /// Members whose target changed.
    pub fn changed(&self) -> usize {
        self.changed.len()
    }
}

fn target_value(table: &TopicTable, parts: &[u32]) -> ConsumerGroupTargetAssignmentMemberValue {
    ConsumerGroupTargetAssignmentMemberValue {
        topic_partitions: table
            .runs(parts)
            .map(|(t, run)| {
                let base = table.base(t);
                TargetTopicPartitions {
                    topic_id: table.id(t),
                    partitions: run.iter().map(|g| (g - base) as i32).collect(),
                }
            })
            .collect(),
    }
}

/// The members an assignment covers: all but those that left statically and whose slot was
/// given up (`member_epoch == -2` without an instance id cannot happen; kept as before).
fn assigned_members(g: &ConsumerGroup) -> impl Iterator<Item = &ConsumerMember> {
    g.members
        .values()
        .filter(|m| m.member_epoch != STATIC_LEAVE_EPOCH || m.instance_id.is_some())
}

/// Step 1: the group as an assignment job for its current epoch. `range` picks the assignor.
pub(super) fn capture(
    g: &ConsumerGroup,
    topics: &TopicsSnapshot,
    range: bool,
    id: u64,
) -> AssignmentJob {
    // Distinct subscriptions: members of a group usually share one `Arc` (see `shared`), so
    // the previous member's is tried first, then each known one.
    let mut members = Members::default();
    let mut last: Option<(*const [String], Option<&str>, u32)> = None;
    let mut ids_len = 0;
    // Each member with its stored target: both maps are in member-id order.
    let mut targets = g.target.iter().peekable();
    let mut group: Vec<(&ConsumerMember, Option<&PackedAssignment>)> =
        Vec::with_capacity(g.members.len());
    for m in assigned_members(g) {
        while targets.next_if(|(id, _)| **id < m.member_id).is_some() {}
        let prev = targets
            .next_if(|(id, _)| **id == m.member_id)
            .map(|(_, p)| p);
        group.push((m, prev));
        ids_len += m.member_id.len();
        let regex = m.subscribed_topic_regex.as_deref();
        let ptr = Arc::as_ptr(&m.subscribed_topic_names);
        let s = match last {
            Some((p, r, s)) if std::ptr::eq(p, ptr) && r == regex => s,
            _ => {
                let s = members
                    .subscriptions
                    .iter()
                    .position(|x| x.matches(m))
                    .unwrap_or_else(|| {
                        members.subscriptions.push(Subscription {
                            names: m.subscribed_topic_names.clone(),
                            regex: m.subscribed_topic_regex.clone(),
                        });
                        members.subscriptions.len() - 1
                    }) as u32;
                last = Some((ptr, regex, s));
                s
            }
        };
        members.subscription.push(s);
    }
    // Each subscription's topics that exist, and the table of all of them.
    let resolved: Vec<Vec<(uuid::Uuid, i32)>> = members
        .subscriptions
        .iter()
        .map(|s| {
            let regex = s.regex.as_ref().and_then(|r| g.regexes.get(r));
            s.names
                .iter()
                .chain(regex.into_iter().flatten())
                .filter_map(|n| topics.get(n).map(|t| (t.id, t.partitions)))
                .collect()
        })
        .collect();
    let table = TopicTable::new(resolved.iter().flatten().copied());
    let mut b = SpecBuilder::new(table);
    let subs: Vec<u32> = resolved
        .iter()
        .map(|ts| {
            let numbers: Vec<u32> = ts
                .iter()
                .filter_map(|(id, _)| b.topics().find(id))
                .collect();
            b.subscription(numbers)
        })
        .collect();
    members.ids.reserve(ids_len);
    for (i, (m, prev)) in group.into_iter().enumerate() {
        b.member(
            subs[members.subscription[i] as usize],
            m.instance_id.as_deref(),
            prev.map(PackedAssignment::iter),
        );
        members.ids.push_str(&m.member_id);
        members.ends.push(members.ids.len() as u32);
        if let Some(iid) = &m.instance_id {
            members.statics.push((i as u32, iid.clone()));
        }
    }
    AssignmentJob {
        group: g.group_id.clone(),
        id,
        group_epoch: g.group_epoch,
        range,
        spec: b.build(),
        members,
    }
}

/// Step 3: write the result (see the module documentation for when it is dropped).
pub(super) fn apply(c: &mut Coordinator, done: AssignmentDone, now: i64, out: &mut Output) {
    if c.assigning.get(&done.group) != Some(&done.id) {
        return; // not the job this group waits for: the group went away (or was reloaded)
    }
    c.assigning.remove(&done.group);
    let Some(g) = c.consumer_groups.get_mut(&done.group) else {
        return;
    };
    if done.group_epoch <= g.assignment_epoch {
        return;
    }
    let members = &done.members;
    // Decide each changed member against the group as it is now; walk the members in order
    // when most of them changed (a first target), look them up when few did.
    let walk = done.changed.len() * 16 >= g.members.len();
    let mut present = g.members.iter().peekable();
    let mut writes: Vec<(String, PackedAssignment, Record)> =
        Vec::with_capacity(done.changed.len());
    for (m, packed, mut record) in done.changed {
        let id = members.id(m);
        let now_there = if walk {
            while present.next_if(|(k, _)| k.as_str() < id).is_some() {}
            present
                .peek()
                .filter(|(k, _)| k.as_str() == id)
                .map(|(_, v)| *v)
        } else {
            g.members.get(id)
        };
        let sub = &members.subscriptions[members.subscription[m as usize] as usize];
        let to = match now_there {
            Some(member) if sub.matches(member) => id.to_string(),
            Some(_) => continue, // subscription changed: a new target follows
            None => {
                // Left, or a static member replaced under a new id (`replace_static` moves the
                // slot without a new epoch): the slot's target goes to the new id.
                let Some(iid) = members.instance(m) else {
                    continue;
                };
                match g.members.values().find(|x| {
                    x.instance_id.as_deref() == Some(iid)
                        && x.member_epoch != STATIC_LEAVE_EPOCH
                        && sub.matches(x)
                }) {
                    Some(x) => x.member_id.clone(),
                    None => continue,
                }
            }
        };
        if let RecordKey::ConsumerGroupTargetAssignmentMember { member_id, .. } = &mut record.key {
            if *member_id != to {
                member_id.clone_from(&to);
            }
        }
        writes.push((to, packed, record));
    }
    // The records' replay, done directly: each packed target is exactly what replaying its
    // record builds (checked in debug builds), without unpacking 10,000 records again.
    for (to, packed, record) in &writes {
        debug_assert_eq!(
            Some(packed),
            replayed_target(record).as_ref(),
            "target of {to}"
        );
    }
    if writes.len() * 16 >= g.target.len().max(1) {
        let mut new: Vec<(String, PackedAssignment)> = Vec::with_capacity(writes.len());
        for (to, packed, record) in writes {
            new.push((to, packed));
            out.records.push(record);
        }
        new.sort_by(|a, b| a.0.cmp(&b.0)); // replacements may be out of order
        new.dedup_by(|a, b| a.0 == b.0);
        let old = std::mem::take(&mut g.target);
        g.target = merge_sorted(old.into_iter(), new.into_iter()).collect();
    } else {
        for (to, packed, record) in writes {
            match g.target.get_mut(&to) {
                Some(t) => *t = packed,
                None => {
                    g.target.insert(to, packed);
                }
            }
            out.records.push(record);
        }
    }
    c.rebalances += 1;
    emit(
        c,
        out,
        RecordKey::ConsumerGroupTargetAssignmentMetadata {
            group: done.group.clone(),
        },
        Some(RecordValue::ConsumerGroupTargetAssignmentMetadata(
            ConsumerGroupTargetAssignmentMetadataValue {
                assignment_epoch: done.group_epoch,
                assignment_timestamp: now,
            },
        )),
    );
}

/// What `consumer::replay` stores for a target record.
fn replayed_target(record: &Record) -> Option<PackedAssignment> {
    match &record.value {
        Some(RecordValue::ConsumerGroupTargetAssignmentMember(v)) => {
            Some(super::consumer::packed_from_value(v))
        }
        _ => None,
    }
}

/// Two maps' entries, both sorted by key, as one sorted sequence; `b` wins on equal keys.
fn merge_sorted<K: Ord, V>(
    a: impl Iterator<Item = (K, V)>,
    b: impl Iterator<Item = (K, V)>,
) -> impl Iterator<Item = (K, V)> {
    let mut a = a.peekable();
    let mut b = b.peekable();
    std::iter::from_fn(move || match (a.peek(), b.peek()) {
        (Some((ka, _)), Some((kb, _))) => match ka.cmp(kb) {
            std::cmp::Ordering::Less => a.next(),
            std::cmp::Ordering::Greater => b.next(),
            std::cmp::Ordering::Equal => {
                a.next();
                b.next()
            }
        },
        (Some(_), None) => a.next(),
        (None, _) => b.next(),
    })
}
