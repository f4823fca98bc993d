//! Server-side assignors for the consumer protocol (reference §5.1, §5.2): `uniform` (default;
//! balanced and sticky) and `range`. Pure functions from members' subscriptions, topic sizes and
//! the previous target to a new target.

use std::collections::{BTreeMap, BTreeSet};
use uuid::Uuid;

/// topic id → partitions
pub type Assignment = BTreeMap<Uuid, BTreeSet<i32>>;

/// One member as an assignor sees it.
#[derive(Debug, Clone)]
pub struct AssignMember {
    pub member_id: String,
    pub instance_id: Option<String>,
    /// Topic ids the member subscribes to that exist.
    pub topics: BTreeSet<Uuid>,
}

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

/// `uniform`: keep what each member had where it still subscribes (stickiness), give every
/// unassigned partition to the least-loaded eligible member, then move partitions from the
/// most- to the least-loaded member while that narrows the spread (balance first: counts end
/// within one of each other when subscriptions allow it).
pub fn uniform(
    members: &[AssignMember],
    partitions: &BTreeMap<Uuid, i32>,
    previous: &BTreeMap<String, Assignment>,
) -> BTreeMap<String, Assignment> {
    if let Some(first) = members.first() {
        if members.iter().all(|m| m.topics == first.topics) {
            return uniform_homogeneous(members, partitions, previous);
        }
    }
    uniform_general(members, partitions, previous)
}

/// Every member subscribes to the same topics (`UniformHomogeneousAssignmentBuilder`): with P
/// partitions and M members each gets P/M, and P%M of them one more. Members keep what they had
/// up to their quota (those that held more keep the extra slots first); the rest is dealt out
/// from the unassigned list to members under quota. O(P + M log M).
fn uniform_homogeneous(
    members: &[AssignMember],
    partitions: &BTreeMap<Uuid, i32>,
    previous: &BTreeMap<String, Assignment>,
) -> BTreeMap<String, Assignment> {
    let topics = &members[0].topics;
    let total: usize = partitions
        .iter()
        .filter(|(t, _)| topics.contains(t))
        .map(|(_, n)| (*n).max(0) as usize)
        .sum();
    let m = members.len();
    let (min_quota, mut extra) = (total / m, total % m);
    let mut out: BTreeMap<String, Assignment> = BTreeMap::new();
    let mut taken: hashbrown::HashSet<(Uuid, i32)> = hashbrown::HashSet::with_capacity(total);
    let mut order: Vec<&AssignMember> = members.iter().collect();
    // Members that held the most keep the extra slots, so fewer partitions move.
    let held = |mm: &AssignMember| previous.get(&mm.member_id).map(count).unwrap_or(0);
    order.sort_by(|a, b| held(b).cmp(&held(a)).then(a.member_id.cmp(&b.member_id)));
    let mut quotas: Vec<usize> = Vec::with_capacity(m);
    for mm in &order {
        let quota = if extra > 0 && held(mm) > min_quota {
            extra -= 1;
            min_quota + 1
        } else {
            min_quota
        };
        let mut a = Assignment::new();
        let mut n = 0;
        if let Some(prev) = previous.get(&mm.member_id) {
            'keep: for (t, ps) in prev {
                let Some(&size) = partitions.get(t) else {
                    continue;
                };
                if !topics.contains(t) {
                    continue;
                }
                for &p in ps {
                    if n == quota {
                        break 'keep;
                    }
                    if p < size && taken.insert((*t, p)) {
                        a.entry(*t).or_default().insert(p);
                        n += 1;
                    }
                }
            }
        }
        quotas.push(quota);
        out.insert(mm.member_id.clone(), a);
    }
    // Extra slots not claimed by stickiness go to the first members still at the minimum.
    for q in quotas.iter_mut() {
        if extra == 0 {
            break;
        }
        if *q == min_quota {
            *q += 1;
            extra -= 1;
        }
    }
    let mut unassigned = partitions
        .iter()
        .filter(|(t, _)| topics.contains(t))
        .flat_map(|(t, &n)| (0..n.max(0)).map(move |p| (*t, p)))
        .filter(|tp| !taken.contains(tp));
    for (i, mm) in order.iter().enumerate() {
        let a = out.get_mut(&mm.member_id).expect("member");
        let mut n = count(a);
        while n < quotas[i] {
            let Some((t, p)) = unassigned.next() else {
                break;
            };
            a.entry(t).or_default().insert(p);
            n += 1;
        }
    }
    out
}

fn uniform_general(
    members: &[AssignMember],
    partitions: &BTreeMap<Uuid, i32>,
    previous: &BTreeMap<String, Assignment>,
) -> BTreeMap<String, Assignment> {
    let mut out: BTreeMap<String, Assignment> = members
        .iter()
        .map(|m| (m.member_id.clone(), Assignment::new()))
        .collect();
    let mut taken: BTreeSet<(Uuid, i32)> = BTreeSet::new();
    // 1. Stickiness: keep previous partitions of still-subscribed topics that still exist.
    for m in members {
        if let Some(prev) = previous.get(&m.member_id) {
            for (t, ps) in prev {
                let Some(&n) = partitions.get(t) else {
                    continue;
                };
                if !m.topics.contains(t) {
                    continue;
                }
                for &p in ps {
                    if p < n && taken.insert((*t, p)) {
                        out.get_mut(&m.member_id)
                            .expect("member")
                            .entry(*t)
                            .or_default()
                            .insert(p);
                    }
                }
            }
        }
    }
    // 2. Unassigned partitions to the least-loaded subscriber (ties: member order).
    let mut loads: BTreeMap<String, usize> =
        out.iter().map(|(m, a)| (m.clone(), count(a))).collect();
    for (t, &n) in partitions {
        let subscribers: Vec<&AssignMember> =
            members.iter().filter(|m| m.topics.contains(t)).collect();
        if subscribers.is_empty() {
            continue;
        }
        for p in 0..n {
            if taken.contains(&(*t, p)) {
                continue;
            }
            let best = subscribers
                .iter()
                .min_by_key(|m| (loads[&m.member_id], m.member_id.as_str()))
                .expect("non-empty");
            out.get_mut(&best.member_id)
                .expect("member")
                .entry(*t)
                .or_default()
                .insert(p);
            *loads.get_mut(&best.member_id).expect("member") += 1;
            taken.insert((*t, p));
        }
    }
    // 3. Balance: move one partition at a time from the most-loaded member to the least-loaded
    // member able to take it, while the difference exceeds one. Each move strictly narrows the
    // spread between the two, so this terminates.
    let by_id: BTreeMap<&str, &AssignMember> =
        members.iter().map(|m| (m.member_id.as_str(), m)).collect();
    for _ in 0..partitions
        .values()
        .map(|&n| n.max(0) as usize)
        .sum::<usize>()
        .max(1)
    {
        let mut order: Vec<(usize, String)> = loads.iter().map(|(m, l)| (*l, m.clone())).collect();
        order.sort();
        let mut moved = false;
        'pairs: for hi in order.iter().rev() {
            for lo in order.iter() {
                if hi.0 <= lo.0 + 1 {
                    break;
                }
                let lo_m = by_id[lo.1.as_str()];
                // Give away the highest partition of a topic the receiver subscribes to.
                let from = out.get(&hi.1).expect("member");
                let candidate = from
                    .iter()
                    .rev()
                    .find(|(t, ps)| lo_m.topics.contains(t) && !ps.is_empty())
                    .map(|(t, ps)| (*t, *ps.iter().next_back().expect("non-empty")));
                if let Some((t, p)) = candidate {
                    let from = out.get_mut(&hi.1).expect("member");
                    let set = from.get_mut(&t).expect("topic");
                    set.remove(&p);
                    if set.is_empty() {
                        from.remove(&t);
                    }
                    out.get_mut(&lo.1)
                        .expect("member")
                        .entry(t)
                        .or_default()
                        .insert(p);
                    *loads.get_mut(&hi.1).expect("member") -= 1;
                    *loads.get_mut(&lo.1).expect("member") += 1;
                    moved = true;
                    break 'pairs;
                }
            }
        }
        if !moved {
            break;
        }
    }
    out
}

/// `range`: per topic, subscribers sorted (static members by instance id first, then the rest
/// by member id) take contiguous ranges, the first `n % m` one partition more. Not sticky.
pub fn range(
    members: &[AssignMember],
    partitions: &BTreeMap<Uuid, i32>,
) -> BTreeMap<String, Assignment> {
    let mut out: BTreeMap<String, Assignment> = members
        .iter()
        .map(|m| (m.member_id.clone(), Assignment::new()))
        .collect();
    let mut sorted: Vec<&AssignMember> = members.iter().collect();
    sorted.sort_by(|a, b| match (&a.instance_id, &b.instance_id) {
        (Some(x), Some(y)) => x.cmp(y),
        (Some(_), None) => std::cmp::Ordering::Less,
        (None, Some(_)) => std::cmp::Ordering::Greater,
        (None, None) => a.member_id.cmp(&b.member_id),
    });
    for (t, &n) in partitions {
        let subs: Vec<&&AssignMember> = sorted.iter().filter(|m| m.topics.contains(t)).collect();
        if subs.is_empty() || n <= 0 {
            continue;
        }
        let (quota, extra) = (n as usize / subs.len(), n as usize % subs.len());
        let mut next = 0i32;
        for (i, m) in subs.iter().enumerate() {
            let take = quota + usize::from(i < extra);
            if take == 0 {
                continue;
            }
            let e = out
                .get_mut(&m.member_id)
                .expect("member")
                .entry(*t)
                .or_default();
            for p in next..next + take as i32 {
                e.insert(p);
            }
            next += take as i32;
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn m(id: &str, topics: &[Uuid]) -> AssignMember {
        AssignMember {
            member_id: id.into(),
            instance_id: None,
            topics: topics.iter().copied().collect(),
        }
    }

    #[test]
    fn uniform_is_sticky_and_balanced_for_the_seed() {
        let t = Uuid::from_u128(7);
        let parts = BTreeMap::from([(t, 6)]);
        let a_only = uniform(&[m("A", &[t])], &parts, &BTreeMap::new());
        assert_eq!(
            a_only["A"][&t].iter().copied().collect::<Vec<_>>(),
            vec![0, 1, 2, 3, 4, 5]
        );
        let both = uniform(&[m("A", &[t]), m("B", &[t])], &parts, &a_only);
        assert_eq!(
            both["A"][&t].iter().copied().collect::<Vec<_>>(),
            vec![0, 1, 2]
        );
        assert_eq!(
            both["B"][&t].iter().copied().collect::<Vec<_>>(),
            vec![3, 4, 5]
        );
    }

    #[test]
    fn uniform_balances_heterogeneous_and_never_double_assigns() {
        let (t1, t2) = (Uuid::from_u128(1), Uuid::from_u128(2));
        let parts = BTreeMap::from([(t1, 5), (t2, 3)]);
        let members = [m("A", &[t1]), m("B", &[t1, t2]), m("C", &[t2])];
        let out = uniform(&members, &parts, &BTreeMap::new());
        let mut seen = BTreeSet::new();
        for a in out.values() {
            for (t, ps) in a {
                for p in ps {
                    assert!(seen.insert((*t, *p)), "double assignment");
                }
            }
        }
        assert_eq!(seen.len(), 8);
        let counts: Vec<usize> = out.values().map(count).collect();
        assert!(
            counts.iter().max().unwrap() - counts.iter().min().unwrap() <= 1,
            "{counts:?}"
        );
        assert!(out["A"].keys().all(|t| *t == t1) && out["C"].keys().all(|t| *t == t2));
    }

    #[test]
    fn packed_assignments_round_trip_and_compare_exactly() {
        let (t1, t2) = (Uuid::from_u128(u128::MAX - 5), Uuid::from_u128(1 << 64));
        let cases: Vec<Assignment> = vec![
            Assignment::new(),
            BTreeMap::from([(t1, BTreeSet::from([0]))]),
            BTreeMap::from([(t1, BTreeSet::from([2, 7, 9])), (t2, BTreeSet::new())]),
            BTreeMap::from([(t1, BTreeSet::from([-1, 3])), (t2, BTreeSet::from([0, 1]))]),
        ];
        for a in &cases {
            let p = PackedAssignment::new(a);
            assert_eq!(&p.to_assignment(), a);
            assert_eq!(p.count(), count(a));
            assert_eq!(p.is_empty(), a.is_empty());
            for b in &cases {
                assert_eq!(p.eq_assignment(b), a == b, "{a:?} vs {b:?}");
                assert_eq!(p == PackedAssignment::new(b), a == b);
            }
            for (t, ps) in a {
                assert!(p.get(t).unwrap().iter().eq(ps.iter()));
            }
        }
        assert!(PackedAssignment::new(&cases[1]).get(&t2).is_none());
        for a in &cases {
            let m = MemberAssignment::from(a.clone());
            assert_eq!(&m.to_assignment(), a);
            assert_eq!(format!("{m:?}"), format!("{a:?}"));
            assert!(m.iter().eq(a.iter()));
            for b in &cases {
                assert_eq!(m == *b, a == b);
                let mb = MemberAssignment::from(b.clone());
                assert_eq!(m == mb, a == b);
                assert_eq!(PackedAssignment::new(&m).eq_assignment(b), a == b);
            }
            for (t, ps) in a {
                assert_eq!(m.get(t), Some(ps));
            }
        }
    }

    #[test]
    fn range_is_contiguous_with_static_members_first() {
        let t = Uuid::from_u128(3);
        let parts = BTreeMap::from([(t, 7)]);
        let mut s = m("z-member", &[t]);
        s.instance_id = Some("i-1".into());
        let out = range(&[m("a", &[t]), s, m("b", &[t])], &parts);
        assert_eq!(
            out["z-member"][&t].iter().copied().collect::<Vec<_>>(),
            vec![0, 1, 2]
        );
        assert_eq!(out["a"][&t].iter().copied().collect::<Vec<_>>(), vec![3, 4]);
        assert_eq!(out["b"][&t].iter().copied().collect::<Vec<_>>(), vec![5, 6]);
    }
}
