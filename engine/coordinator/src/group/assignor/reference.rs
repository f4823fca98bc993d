//! The assignors as they were before the index-based rewrite, kept as the reference model of
//! the property tests: `uniform`'s homogeneous path and `range` must give exactly these
//! targets. Over `BTreeMap`s and `BTreeSet`s, quadratic in places; tests only.

use super::{count, Assignment};
use std::collections::{BTreeMap, BTreeSet};
use uuid::Uuid;

/// One member as the reference assignors see it.
#[derive(Debug, Clone)]
pub struct AssignMember {
    pub member_id: String,
    pub instance_id: Option<String>,
    /// Topic ids the member subscribes to that exist.
    pub topics: BTreeSet<Uuid>,
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
