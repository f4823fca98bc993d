//! Server-side assignors for the consumer protocol (reference §5.1, §5.2): `uniform` (default;
//! balanced and sticky) and `range`. Pure functions from the group reduced to integers — an
//! [`AssignSpec`] — to the members whose target changed ([`Outcome`]).
//!
//! Why integers: a group of 10,000 members subscribed to 1,000 topics is 10,000 copies of a
//! 1,000-topic set and 10,000 maps of UUIDs when written as Kafka's types, and building that took
//! longer than assigning. Here topics are numbered in id order ([`TopicTable`]), so partition `p`
//! of topic `t` is the single integer `base(t) + p` and sorting by it is sorting by (topic id,
//! partition); members that subscribe to the same topics share one interned subscription; a
//! member's previous target is a slice of one flat vector; and the result lists only the members
//! whose target changed, which after one member joins a stable group is a handful. Kafka's
//! properties are kept (`UniformHomogeneousAssignmentBuilder`,
//! `UniformHeterogeneousAssignmentBuilder`, `RangeAssignor` in group-coordinator/.../assignor):
//! every partition of a subscribed topic goes to exactly one subscriber; uniform balances first
//! (counts within one among members that can share) and is sticky second; range is not sticky.

mod range;
#[cfg(test)]
pub(crate) mod reference;
#[cfg(test)]
mod tests;
mod uniform;

pub use range::range;
pub use uniform::uniform;

use std::collections::{BTreeMap, BTreeSet};
use uuid::Uuid;

/// topic id → partitions
pub type Assignment = BTreeMap<Uuid, BTreeSet<i32>>;

pub fn count(a: &Assignment) -> usize {
    a.values().map(|p| p.len()).sum()
}

/// An [`Assignment`] in one allocation, for assignments that are stored per member and rarely
/// read (targets, what a member last reported). A `BTreeMap<Uuid, BTreeSet<i32>>` costs a
/// ~450-byte map node plus a set node per topic even for one partition; this costs 4 bytes per
/// partition plus 20 per topic. Layout, topics in ascending id order: the id as four words, the
/// partition count, then the partitions ascending. Packing is canonical, so two packed values
/// are equal exactly when their assignments are.
#[derive(Clone, PartialEq, Eq, Hash, Default)]
pub struct PackedAssignment(Box<[i32]>);

impl PackedAssignment {
    pub fn new<'a, I>(a: I) -> Self
    where
        I: IntoIterator<Item = (&'a Uuid, &'a BTreeSet<i32>)> + Clone,
    {
        let words = a.clone().into_iter().map(|(_, ps)| 5 + ps.len()).sum();
        let mut v = Vec::with_capacity(words);
        for (t, ps) in a {
            let id = t.as_u128();
            for i in (0..4).rev() {
                v.push((id >> (32 * i)) as u32 as i32);
            }
            v.push(ps.len() as i32);
            v.extend(ps.iter().copied());
        }
        Self(v.into_boxed_slice())
    }

    /// Topics with their partitions, in ascending topic id order.
    pub fn iter(&self) -> impl Iterator<Item = (Uuid, &[i32])> {
        let mut rest: &[i32] = &self.0;
        std::iter::from_fn(move || {
            if rest.len() < 5 {
                return None;
            }
            let id = rest[..4]
                .iter()
                .fold(0u128, |acc, w| (acc << 32) | (*w as u32 as u128));
            let n = rest[4] as usize;
            let ps = &rest[5..5 + n];
            rest = &rest[5 + n..];
            Some((Uuid::from_u128(id), ps))
        })
    }

    pub fn get(&self, topic: &Uuid) -> Option<&[i32]> {
        self.iter().find(|(t, _)| t == topic).map(|(_, ps)| ps)
    }

    pub fn to_assignment(&self) -> Assignment {
        self.iter()
            .map(|(t, ps)| (t, ps.iter().copied().collect()))
            .collect()
    }

    /// `self` packs exactly `a` (an `&Assignment` or `&MemberAssignment`).
    pub fn eq_assignment<'a>(
        &self,
        a: impl IntoIterator<Item = (&'a Uuid, &'a BTreeSet<i32>)>,
    ) -> bool {
        let mut mine = self.iter();
        for (t, ps) in a {
            match mine.next() {
                Some((u, qs)) if u == *t && qs.len() == ps.len() => {
                    if !qs.iter().eq(ps.iter()) {
                        return false;
                    }
                }
                _ => return false,
            }
        }
        mine.next().is_none()
    }

    pub fn count(&self) -> usize {
        self.iter().map(|(_, ps)| ps.len()).sum()
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

impl std::fmt::Debug for PackedAssignment {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_map().entries(self.iter()).finish()
    }
}

/// A member's current assignment (or partitions pending revocation): the topics of an
/// [`Assignment`] in a sorted `Vec` of exact size instead of a `BTreeMap`, whose first node alone
/// is ~450 bytes for one topic. Read like the map (`get`, iteration in topic order, equality
/// with an `Assignment`); built from one.
#[derive(Clone, PartialEq, Eq, Default)]
pub struct MemberAssignment(Vec<(Uuid, BTreeSet<i32>)>);

type TopicSetRef<'a> = (&'a Uuid, &'a BTreeSet<i32>);

impl MemberAssignment {
    pub fn new() -> Self {
        Self(Vec::new())
    }
    pub fn get(&self, topic: &Uuid) -> Option<&BTreeSet<i32>> {
        self.0
            .binary_search_by(|(t, _)| t.cmp(topic))
            .ok()
            .map(|i| &self.0[i].1)
    }
    pub fn iter(&self) -> impl Iterator<Item = TopicSetRef<'_>> {
        self.0.iter().map(|(t, ps)| (t, ps))
    }
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
    pub fn len(&self) -> usize {
        self.0.len()
    }
    pub fn clear(&mut self) {
        self.0 = Vec::new();
    }
    pub fn to_assignment(&self) -> Assignment {
        self.0.iter().cloned().collect()
    }
}

impl From<Assignment> for MemberAssignment {
    fn from(a: Assignment) -> Self {
        let mut v: Vec<_> = a.into_iter().collect();
        v.shrink_to_fit();
        Self(v)
    }
}

impl<'a> IntoIterator for &'a MemberAssignment {
    type Item = TopicSetRef<'a>;
    type IntoIter = std::iter::Map<
        std::slice::Iter<'a, (Uuid, BTreeSet<i32>)>,
        fn(&'a (Uuid, BTreeSet<i32>)) -> TopicSetRef<'a>,
    >;
    fn into_iter(self) -> Self::IntoIter {
        self.0.iter().map(|(t, ps)| (t, ps))
    }
}

impl PartialEq<Assignment> for MemberAssignment {
    fn eq(&self, a: &Assignment) -> bool {
        self.0.len() == a.len() && self.iter().eq(a.iter())
    }
}

impl std::fmt::Debug for MemberAssignment {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_map().entries(self.iter()).finish()
    }
}

/// The topics an assignment may use, numbered in ascending id order. Partition `p` of topic `t`
/// is the global index `base(t) + p`, so ascending global indexes are (topic id, partition)
/// order — the order of an [`Assignment`] and of a [`PackedAssignment`].
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TopicTable {
    ids: Vec<Uuid>,
    /// `base[t]`: global index of partition 0 of topic `t`; `base[len]`: the total.
    base: Vec<u32>,
}

impl TopicTable {
    /// Topics (id, partition count) in any order; a repeated id keeps its first count, a
    /// negative count is 0. Counts are cut so that the total fits a `u32` (no broker comes near).
    pub fn new(topics: impl IntoIterator<Item = (Uuid, i32)>) -> Self {
        let mut v: Vec<(Uuid, i32)> = topics.into_iter().collect();
        v.sort_by_key(|(id, _)| *id);
        v.dedup_by_key(|(id, _)| *id);
        let mut base = Vec::with_capacity(v.len() + 1);
        let mut total: u32 = 0;
        base.push(0);
        for (_, n) in &v {
            total = total
                .saturating_add(n.max(&0).unsigned_abs())
                .min(u32::MAX - 1);
            base.push(total);
        }
        Self {
            ids: v.into_iter().map(|(id, _)| id).collect(),
            base,
        }
    }

    pub fn len(&self) -> usize {
        self.ids.len()
    }

    pub fn is_empty(&self) -> bool {
        self.ids.is_empty()
    }

    /// Partitions of every topic together.
    pub fn total(&self) -> u32 {
        self.base.last().copied().unwrap_or(0)
    }

    pub fn id(&self, t: u32) -> Uuid {
        self.ids[t as usize]
    }

    pub fn ids(&self) -> &[Uuid] {
        &self.ids
    }

    pub fn size(&self, t: u32) -> u32 {
        self.base[t as usize + 1] - self.base[t as usize]
    }

    pub fn base(&self, t: u32) -> u32 {
        self.base[t as usize]
    }

    /// The number of topic `id`, if the table has it.
    pub fn find(&self, id: &Uuid) -> Option<u32> {
        self.ids.binary_search(id).ok().map(|t| t as u32)
    }

    /// `parts` (ascending global indexes) cut into (topic, partitions of it) runs, in topic order.
    pub fn runs<'a>(&'a self, parts: &'a [u32]) -> impl Iterator<Item = (u32, &'a [u32])> + 'a {
        let mut rest = parts;
        let mut t = 0usize;
        std::iter::from_fn(move || {
            let first = *rest.first()?;
            // Topics are few next to partitions: step, then gallop only when far.
            if self.base[t + 1] <= first {
                t = self.base.partition_point(|b| *b <= first) - 1;
            }
            let end = self.base[t + 1];
            let n = rest.partition_point(|g| *g < end);
            let (run, tail) = rest.split_at(n);
            rest = tail;
            let topic = t as u32;
            t += 1;
            Some((topic, run))
        })
    }
}

impl PackedAssignment {
    /// The packed form of `parts`, ascending global indexes of `table`.
    pub fn from_globals(table: &TopicTable, parts: &[u32]) -> Self {
        let mut v = Vec::with_capacity(parts.len() + 5 * parts.len().min(table.len()));
        for (t, run) in table.runs(parts) {
            let id = table.id(t).as_u128();
            for i in (0..4).rev() {
                v.push((id >> (32 * i)) as u32 as i32);
            }
            v.push(run.len() as i32);
            let base = table.base(t);
            v.extend(run.iter().map(|g| (g - base) as i32));
        }
        v.shrink_to_fit();
        Self(v.into_boxed_slice())
    }
}

impl PackedAssignment {
    /// Packed from (topic, partitions) runs as a record carries them: topics by id, partitions
    /// ascending without repeats, empty topics dropped (a later run of a topic replaces an
    /// earlier one). Records this broker writes are already in that form and are packed as they
    /// are; anything else goes through an [`Assignment`].
    pub fn from_runs<'a>(runs: impl IntoIterator<Item = (Uuid, &'a [i32])>) -> Self {
        let runs: Vec<(Uuid, &[i32])> = runs.into_iter().collect();
        let canonical = runs.windows(2).all(|w| w[0].0 < w[1].0)
            && runs
                .iter()
                .all(|(_, ps)| !ps.is_empty() && ps.windows(2).all(|w| w[0] < w[1]));
        if !canonical {
            let a: Assignment = runs
                .iter()
                .map(|(t, ps)| (*t, ps.iter().copied().collect::<BTreeSet<i32>>()))
                .filter(|(_, ps)| !ps.is_empty())
                .collect();
            return Self::new(&a);
        }
        let mut v = Vec::with_capacity(runs.iter().map(|(_, ps)| 5 + ps.len()).sum());
        for (t, ps) in runs {
            let id = t.as_u128();
            for i in (0..4).rev() {
                v.push((id >> (32 * i)) as u32 as i32);
            }
            v.push(ps.len() as i32);
            v.extend_from_slice(ps);
        }
        Self(v.into_boxed_slice())
    }
}

/// The group as an assignor sees it, in integers (see the module documentation). Built with
/// [`SpecBuilder`]; members are numbered in the order they were added, which is member-id order
/// for the coordinator (ties in `uniform` and the order of `range` follow it).
#[derive(Debug, Clone, Default)]
pub struct AssignSpec {
    topics: TopicTable,
    /// Distinct subscriptions, each its topics ascending.
    subs: Vec<Box<[u32]>>,
    /// Each member's subscription.
    member_sub: Vec<u32>,
    /// Member `m`'s previous target is `prev[prev_off[m]..prev_off[m + 1]]`, ascending, reduced
    /// to partitions that exist of topics it subscribes to.
    prev_off: Vec<u32>,
    prev: Vec<u32>,
    /// Partitions in the previous target as stored, counting what `prev` left out.
    held: Vec<u32>,
    /// The stored previous target is not exactly `prev` (it had none, or partitions `prev` left
    /// out), so the member's target is written whatever the result.
    dirty: Vec<bool>,
    /// `range`'s member order when some members are static (instance ids first, in their order,
    /// then the others in member order); `None` = member order.
    range_order: Option<Vec<u32>>,
}

impl AssignSpec {
    pub fn members(&self) -> usize {
        self.member_sub.len()
    }

    pub fn topics(&self) -> &TopicTable {
        &self.topics
    }

    /// Member `m`'s previous target as the assignor uses it.
    pub fn previous(&self, m: u32) -> &[u32] {
        &self.prev[self.prev_off[m as usize] as usize..self.prev_off[m as usize + 1] as usize]
    }

    /// Member `m`'s subscription: its topics, ascending.
    pub fn subscription(&self, m: u32) -> &[u32] {
        &self.subs[self.member_sub[m as usize] as usize]
    }

    /// A size of the work an assignment of this group does (members plus partitions, previous
    /// and current), to decide whether it may run inline.
    pub fn work(&self) -> usize {
        self.members() + self.prev.len() + self.topics.total() as usize
    }
}

/// Builds an [`AssignSpec`]: subscriptions are interned (members with the same topics share
/// one), previous targets reduced to what the assignor may keep.
#[derive(Debug)]
pub struct SpecBuilder {
    spec: AssignSpec,
    interned: hashbrown::HashMap<Box<[u32]>, u32>,
    statics: Vec<(Box<str>, u32)>,
    scratch: Vec<u32>,
    last_topic: Option<(Uuid, u32)>,
}

impl SpecBuilder {
    pub fn new(topics: TopicTable) -> Self {
        Self {
            spec: AssignSpec {
                topics,
                prev_off: vec![0],
                ..Default::default()
            },
            interned: hashbrown::HashMap::new(),
            statics: Vec::new(),
            scratch: Vec::new(),
            last_topic: None,
        }
    }

    pub fn topics(&self) -> &TopicTable {
        &self.spec.topics
    }

    /// The subscription to the given topic numbers (any order, repeats allowed), interned.
    pub fn subscription(&mut self, topics: impl IntoIterator<Item = u32>) -> u32 {
        self.scratch.clear();
        self.scratch.extend(topics);
        self.scratch.sort_unstable();
        self.scratch.dedup();
        let n = self.spec.topics.len() as u32;
        debug_assert!(
            self.scratch.iter().all(|t| *t < n),
            "a topic outside the table"
        );
        self.scratch.retain(|t| *t < n);
        if let Some(&id) = self.interned.get(self.scratch.as_slice()) {
            return id;
        }
        let id = self.spec.subs.len() as u32;
        let topics: Box<[u32]> = self.scratch.as_slice().into();
        self.spec.subs.push(topics.clone());
        self.interned.insert(topics, id);
        id
    }

    /// The next member: its subscription (from [`SpecBuilder::subscription`]), its instance id
    /// if static, and its previous target as (topic id, partitions) runs — `None` when it has
    /// none.
    pub fn member<'a>(
        &mut self,
        sub: u32,
        instance_id: Option<&str>,
        previous: Option<impl IntoIterator<Item = (Uuid, &'a [i32])>>,
    ) {
        let m = self.spec.member_sub.len() as u32;
        let spec = &mut self.spec;
        spec.member_sub.push(sub);
        let topics = &spec.subs[sub as usize];
        // A subscription to every topic of the table (any homogeneous group) needs no lookup.
        let all = topics.len() == spec.topics.len();
        let start = spec.prev.len();
        let mut held = 0u32;
        let mut dirty = previous.is_none();
        let mut sorted = true;
        for (id, parts) in previous.into_iter().flatten() {
            held = held.saturating_add(parts.len() as u32);
            // Members' targets are mostly in the topic the previous member's ended in.
            let t = match self.last_topic {
                Some((last, t)) if last == id => Some(t),
                _ => spec.topics.find(&id),
            };
            let Some(t) = t else {
                dirty |= !parts.is_empty();
                continue;
            };
            self.last_topic = Some((id, t));
            if !all && topics.binary_search(&t).is_err() {
                dirty |= !parts.is_empty();
                continue;
            }
            let (base, size) = (spec.topics.base(t), spec.topics.size(t));
            let before = spec.prev.len();
            spec.prev.extend(
                parts
                    .iter()
                    .filter(|p| (0..size as i64).contains(&(**p as i64)))
                    .map(|p| base + *p as u32),
            );
            dirty |= spec.prev.len() - before != parts.len();
            sorted &= before == start
                || before == spec.prev.len()
                || spec.prev[before - 1] < spec.prev[before];
            sorted &= spec.prev[before..].windows(2).all(|w| w[0] < w[1]);
        }
        if !sorted {
            // Not canonical (repeats, or out of order): the assignor needs a set.
            let len = spec.prev.len();
            spec.prev[start..].sort_unstable();
            let mut w = start;
            for r in start..len {
                if w == start || spec.prev[w - 1] != spec.prev[r] {
                    spec.prev[w] = spec.prev[r];
                    w += 1;
                }
            }
            spec.prev.truncate(w);
            dirty = true;
        }
        spec.prev_off.push(spec.prev.len() as u32);
        spec.held.push(held);
        spec.dirty.push(dirty);
        if let Some(i) = instance_id {
            self.statics.push((i.into(), m));
        }
    }

    pub fn build(mut self) -> AssignSpec {
        if !self.statics.is_empty() {
            // `RangeAssignor.sortMemberIds`: static members by instance id first, then the rest
            // in member order.
            self.statics.sort();
            let mut order: Vec<u32> = self.statics.iter().map(|(_, m)| *m).collect();
            let mut is_static = vec![false; self.spec.members()];
            for &m in &order {
                is_static[m as usize] = true;
            }
            order.extend((0..self.spec.members() as u32).filter(|m| !is_static[*m as usize]));
            self.spec.range_order = Some(order);
        }
        self.spec
    }
}

/// What an assignor decided: the new target of every member whose target changed, in member
/// order. A member not listed keeps exactly its previous target.
#[derive(Debug, Clone, Default)]
pub struct Outcome {
    /// Per member: where its new target lies in `parts`, or `UNCHANGED`.
    spans: Vec<(u32, u32)>,
    parts: Vec<u32>,
}

const UNCHANGED: (u32, u32) = (u32::MAX, 0);

impl Outcome {
    fn new(members: usize) -> Self {
        Self {
            spans: vec![UNCHANGED; members],
            parts: Vec::new(),
        }
    }

    /// Record member `m`'s new target (ascending), unless it equals what it had.
    fn set(&mut self, spec: &AssignSpec, m: u32, parts: &[u32]) {
        let start = self.parts.len();
        self.parts.extend_from_slice(parts);
        self.finish(spec, m, start);
    }

    /// Record member `m`'s new target, the merge of two ascending lists.
    fn set_merged(&mut self, spec: &AssignSpec, m: u32, a: &[u32], b: &[u32]) {
        let start = self.parts.len();
        self.parts.reserve(a.len() + b.len());
        let (mut i, mut j) = (0, 0);
        while i < a.len() && j < b.len() {
            if a[i] < b[j] {
                self.parts.push(a[i]);
                i += 1;
            } else {
                self.parts.push(b[j]);
                j += 1;
            }
        }
        self.parts.extend_from_slice(&a[i..]);
        self.parts.extend_from_slice(&b[j..]);
        self.finish(spec, m, start);
    }

    /// Member `m`'s new target is what was pushed to `parts` since `start`: keep it, unless it
    /// equals what it had.
    fn finish(&mut self, spec: &AssignSpec, m: u32, start: usize) {
        debug_assert!(self.parts[start..].windows(2).all(|w| w[0] < w[1]));
        if !spec.dirty[m as usize] && self.parts[start..] == *spec.previous(m) {
            self.parts.truncate(start);
            self.spans[m as usize] = UNCHANGED;
        } else {
            self.spans[m as usize] = (start as u32, (self.parts.len() - start) as u32);
        }
    }

    /// Members whose target changed, ascending, with their new target.
    pub fn changed(&self) -> impl Iterator<Item = (u32, &[u32])> + '_ {
        self.spans
            .iter()
            .enumerate()
            .filter(|(_, s)| **s != UNCHANGED)
            .map(|(m, &(start, len))| {
                (
                    m as u32,
                    &self.parts[start as usize..(start + len) as usize],
                )
            })
    }

    pub fn changed_count(&self) -> usize {
        self.spans.iter().filter(|s| **s != UNCHANGED).count()
    }

    /// Member `m`'s target after the assignment.
    pub fn target<'a>(&'a self, spec: &'a AssignSpec, m: u32) -> &'a [u32] {
        match self.spans[m as usize] {
            UNCHANGED => spec.previous(m),
            (start, len) => &self.parts[start as usize..(start + len) as usize],
        }
    }
}

/// A set of global partition indexes.
#[derive(Debug)]
struct Bits(Vec<u64>);

impl Bits {
    fn new(n: u32) -> Self {
        Self(vec![0; (n as usize).div_ceil(64)])
    }

    /// Set `i`; whether it was set before.
    #[inline]
    fn test_set(&mut self, i: u32) -> bool {
        let (w, b) = ((i / 64) as usize, 1u64 << (i % 64));
        let was = self.0[w] & b != 0;
        self.0[w] |= b;
        was
    }

    /// The bits of word `w` that lie in `lo..hi`.
    #[inline]
    fn mask(w: usize, lo: u32, hi: u32) -> u64 {
        let (start, end) = (w as u64 * 64, w as u64 * 64 + 64);
        let (a, b) = ((lo as u64).max(start) - start, (hi as u64).min(end) - start);
        if b >= 64 {
            !0u64 << a
        } else {
            ((1u64 << b) - 1) & (!0u64 << a)
        }
    }

    /// Set every index in `lo..hi` if none of them is set; whether it did.
    fn claim_range(&mut self, lo: u32, hi: u32) -> bool {
        if lo >= hi {
            return true;
        }
        let (first, last) = ((lo / 64) as usize, ((hi - 1) / 64) as usize);
        if (first..=last).any(|w| self.0[w] & Self::mask(w, lo, hi) != 0) {
            return false;
        }
        for w in first..=last {
            self.0[w] |= Self::mask(w, lo, hi);
        }
        true
    }

    /// Claim the ascending `parts` in order until one is already set; how many it claimed.
    /// Consecutive runs (the usual shape of a target) are claimed a word at a time.
    fn claim_prefix(&mut self, parts: &[u32]) -> usize {
        let mut i = 0;
        while i < parts.len() {
            let mut j = i + 1;
            while j < parts.len() && parts[j] == parts[j - 1] + 1 {
                j += 1;
            }
            if !self.claim_range(parts[i], parts[j - 1] + 1) {
                // Somewhere in this run: one at a time.
                while i < j && !self.test_set(parts[i]) {
                    i += 1;
                }
                return i;
            }
            i = j;
        }
        i
    }

    /// Append the indexes in `lo..hi` not set, ascending, to `out`.
    fn push_zeros(&self, lo: u32, hi: u32, out: &mut Vec<u32>) {
        if lo >= hi {
            return;
        }
        for w in (lo / 64) as usize..=((hi - 1) / 64) as usize {
            let mut free = !self.0[w] & Self::mask(w, lo, hi);
            let base = w as u32 * 64;
            if free == !0u64 {
                out.extend(base..base + 64);
                continue;
            }
            while free != 0 {
                out.push(base + free.trailing_zeros());
                free &= free - 1;
            }
        }
    }
}
