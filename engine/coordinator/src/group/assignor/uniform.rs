//! `uniform`: balanced first, sticky second.
//!
//! The group is cut into independent parts: subscriptions that share a topic belong together
//! (union-find over topics). A part whose members all have one subscription is homogeneous —
//! every group where all members subscribe alike, and each bucket of Kafka's heterogeneous
//! benchmark — and is assigned by [`homogeneous`] in O(members + partitions). A part mixing
//! subscriptions goes through [`mixed`]: keep, hand out to the least loaded, then move partitions
//! from the most to the least loaded subscriber of each topic until no move narrows a gap (the
//! balance `UniformHeterogeneousAssignmentBuilder` reaches).

use super::{AssignSpec, Bits, Outcome};
use std::cmp::Reverse;
use std::collections::BinaryHeap;

/// Balancing passes over a mixed part's topics before giving up on perfect balance. Each pass
/// that moves nothing ends the loop; every move strictly lowers the sum of squared member loads,
/// so the loop ends anyway — the cap only bounds pathological overlaps (Kafka stops after 16).
const MAX_BALANCE_PASSES: usize = 64;

const NONE: u32 = u32::MAX;

/// The uniform assignment of `spec` (see the module documentation).
pub fn uniform(spec: &AssignSpec) -> Outcome {
    let m = spec.members();
    let mut out = Outcome::new(m);
    if m == 0 {
        return out;
    }
    let first = spec.member_sub[0];
    if spec.member_sub.iter().all(|s| *s == first) {
        let members: Vec<u32> = (0..m as u32).collect();
        homogeneous(spec, &members, &spec.subs[first as usize], &mut out);
        return out;
    }
    let mut owner: Vec<u32> = Vec::new();
    for part in parts(spec) {
        if part.subs == 1 {
            homogeneous(spec, &part.members, &part.topics, &mut out);
        } else {
            if owner.is_empty() {
                owner = vec![NONE; spec.topics.total() as usize];
            }
            mixed(spec, &part, &mut owner, &mut out);
        }
    }
    out
}

/// Members sharing topics through their subscriptions, and those topics (both ascending).
struct Part {
    members: Vec<u32>,
    topics: Vec<u32>,
    /// How many distinct subscriptions the members have.
    subs: usize,
}

fn parts(spec: &AssignSpec) -> Vec<Part> {
    let d = spec.subs.len();
    let mut used = vec![false; d];
    for s in &spec.member_sub {
        used[*s as usize] = true;
    }
    let mut parent: Vec<u32> = (0..d as u32).collect();
    fn find(parent: &mut [u32], mut x: u32) -> u32 {
        while parent[x as usize] != x {
            let up = parent[parent[x as usize] as usize];
            parent[x as usize] = up;
            x = up;
        }
        x
    }
    let mut topic_sub = vec![NONE; spec.topics.len()];
    for s in (0..d).filter(|s| used[*s]) {
        for &t in spec.subs[s].iter() {
            match topic_sub[t as usize] {
                NONE => topic_sub[t as usize] = s as u32,
                other => {
                    let (a, b) = (find(&mut parent, other), find(&mut parent, s as u32));
                    if a != b {
                        parent[a.max(b) as usize] = a.min(b);
                    }
                }
            }
        }
    }
    let mut part_of = vec![NONE; d];
    let mut out: Vec<Part> = Vec::new();
    for s in (0..d).filter(|s| used[*s]) {
        let root = find(&mut parent, s as u32) as usize;
        if part_of[root] == NONE {
            part_of[root] = out.len() as u32;
            out.push(Part {
                members: Vec::new(),
                topics: Vec::new(),
                subs: 0,
            });
        }
        out[part_of[root] as usize].subs += 1;
        part_of[s] = part_of[root];
    }
    for (m, s) in spec.member_sub.iter().enumerate() {
        out[part_of[*s as usize] as usize].members.push(m as u32);
    }
    for (t, s) in topic_sub.iter().enumerate() {
        if *s != NONE {
            out[part_of[*s as usize] as usize].topics.push(t as u32);
        }
    }
    out
}

/// `members` (ascending) all subscribe to exactly `topics` (ascending). With P partitions over
/// M members each gets P/M and P%M of them one more: the members that held the most keep the
/// extra slots (fewer moves), ties in member order. Each keeps its previous partitions up to its
/// quota; the rest are dealt in (topic id, partition) order to members under quota, in the same
/// order. O(M + P); nothing is written for a member whose target stays as it was.
fn homogeneous(spec: &AssignSpec, members: &[u32], topics: &[u32], out: &mut Outcome) {
    let n = members.len();
    let total: u64 = topics.iter().map(|t| spec.topics.size(*t) as u64).sum();
    let min_quota = (total / n as u64) as u32;
    let mut extra = total % n as u64;
    let order = by_held_descending(spec, members);
    let mut taken = Bits::new(spec.topics.total());
    let mut quota = vec![0u32; n];
    let mut kept = vec![0u32; n];
    // A member whose kept partitions are not a prefix of its previous target (another member
    // kept one of them first: only after a corrupt or hand-made previous target).
    let mut irregular: Vec<(usize, Vec<u32>)> = Vec::new();
    for (k, &m) in order.iter().enumerate() {
        let q = if extra > 0 && spec.held[m as usize] > min_quota {
            extra -= 1;
            min_quota + 1
        } else {
            min_quota
        };
        quota[k] = q;
        let prev = spec.previous(m);
        let want = prev.len().min(q as usize);
        let claimed = taken.claim_prefix(&prev[..want]);
        if claimed < want {
            // prev[claimed] is someone else's: keep the rest that is free, up to the quota.
            let mut list: Vec<u32> = prev[..claimed].to_vec();
            for &g in &prev[claimed + 1..] {
                if list.len() == q as usize {
                    break;
                }
                if !taken.test_set(g) {
                    list.push(g);
                }
            }
            kept[k] = list.len() as u32;
            irregular.push((k, list));
        } else {
            kept[k] = claimed as u32;
        }
    }
    // Extra slots stickiness left unclaimed go to the first members still at the minimum.
    for q in quota.iter_mut() {
        if extra == 0 {
            break;
        }
        if *q == min_quota {
            *q += 1;
            extra -= 1;
        }
    }
    // What nobody kept, in (topic id, partition) order, dealt in member order.
    let mut free: Vec<u32> = Vec::new();
    for &t in topics {
        let base = spec.topics.base(t);
        taken.push_zeros(base, base + spec.topics.size(t), &mut free);
    }
    let mut next = 0usize;
    let mut irregular = irregular.into_iter().peekable();
    for (k, &m) in order.iter().enumerate() {
        let need = (quota[k] - kept[k]) as usize;
        let dealt = &free[next..(next + need).min(free.len())];
        next += dealt.len();
        let list = irregular.next_if(|(at, _)| *at == k).map(|(_, l)| l);
        let prev = spec.previous(m);
        let own: &[u32] = match &list {
            Some(l) => l,
            None => &prev[..kept[k] as usize],
        };
        if dealt.is_empty() && own.len() == prev.len() && !spec.dirty[m as usize] {
            continue; // exactly what it had
        }
        if own.is_empty() {
            out.set(spec, m, dealt);
        } else {
            out.set_merged(spec, m, own, dealt);
        }
    }
    debug_assert_eq!(next, free.len(), "every partition is assigned");
}

/// `members` ordered by previous target size, largest first, ties in member order (stable).
fn by_held_descending(spec: &AssignSpec, members: &[u32]) -> Vec<u32> {
    let held = |m: u32| spec.held[m as usize];
    let max = members.iter().map(|m| held(*m)).max().unwrap_or(0) as usize;
    if max > 4 * members.len() + 1024 {
        let mut order = members.to_vec();
        order.sort_by_key(|m| Reverse(held(*m)));
        return order;
    }
    // Counting sort: sizes are small next to the member count.
    let mut start = vec![0u32; max + 2];
    for &m in members {
        start[max - held(m) as usize + 1] += 1;
    }
    for i in 1..start.len() {
        start[i] += start[i - 1];
    }
    let mut order = vec![0u32; members.len()];
    for &m in members {
        let slot = &mut start[max - held(m) as usize];
        order[*slot as usize] = m;
        *slot += 1;
    }
    order
}

/// A part whose members have different subscriptions. `owner` (per global partition, `NONE`
/// when free) is shared by every mixed part of the call: parts have disjoint topics.
///
/// 1. Every member keeps what it had of the topics it still subscribes to (first claim wins).
/// 2. Free partitions go, topic by topic, to the least loaded subscriber (ties: member order).
///    Topics with the fewest subscribers go first, then the largest: they have the least room.
/// 3. Passes over the topics move a partition from the most loaded member holding one of the
///    topic to the least loaded subscriber while their loads differ by more than one, until a
///    pass moves nothing. Partitions a member was handed in this call move before those it kept.
///
/// At the end, for every topic with two or more subscribers, no member holding one of its
/// partitions has more than one partition more than any subscriber of it (Kafka's balance
/// condition), unless the pass cap was hit.
fn mixed(spec: &AssignSpec, part: &Part, owner: &mut [u32], out: &mut Outcome) {
    let m_total = spec.members();
    // Local member numbers: position in `part.members`.
    let mut local = vec![NONE; m_total];
    for (i, m) in part.members.iter().enumerate() {
        local[*m as usize] = i as u32;
    }
    let n = part.members.len();
    let mut load = vec![0u32; n];
    for (i, &m) in part.members.iter().enumerate() {
        for &g in spec.previous(m) {
            if owner[g as usize] == NONE {
                owner[g as usize] = i as u32;
                load[i] += 1;
            }
        }
    }
    // Subscribers of each topic of the part (local numbers, ascending).
    let mut sub_members: hashbrown::HashMap<u32, Vec<u32>> = hashbrown::HashMap::new();
    for (i, &m) in part.members.iter().enumerate() {
        sub_members
            .entry(spec.member_sub[m as usize])
            .or_default()
            .push(i as u32);
    }
    let mut topic_subs: hashbrown::HashMap<u32, Vec<u32>> = hashbrown::HashMap::new();
    let mut subs: Vec<u32> = sub_members.keys().copied().collect();
    subs.sort_unstable();
    for &s in &subs {
        for &t in spec.subs[s as usize].iter() {
            topic_subs.entry(t).or_default().push(s);
        }
    }
    // (topic, its size, its subscribers), the topics with the fewest subscribers first, then
    // the largest.
    let mut topics: Vec<(u32, u32, Vec<u32>)> = part
        .topics
        .iter()
        .map(|&t| {
            let mut v: Vec<u32> = topic_subs[&t]
                .iter()
                .flat_map(|s| sub_members[s].iter().copied())
                .collect();
            v.sort_unstable();
            (t, spec.topics.size(t), v)
        })
        .collect();
    topics.sort_by_key(|(t, size, v)| (v.len(), Reverse(*size), *t));
    // 2. Hand out.
    for (t, size, subscribers) in &topics {
        let base = spec.topics.base(*t);
        let free: Vec<u32> = (base..base + size)
            .filter(|g| owner[*g as usize] == NONE)
            .collect();
        if free.is_empty() {
            continue;
        }
        let mut heap: BinaryHeap<Reverse<(u32, u32)>> = subscribers
            .iter()
            .map(|&i| Reverse((load[i as usize], i)))
            .collect();
        for g in free {
            let Reverse((l, i)) = heap.pop().expect("a topic of the part has subscribers");
            owner[g as usize] = i;
            load[i as usize] = l + 1;
            heap.push(Reverse((l + 1, i)));
        }
    }
    // 3. Balance.
    for _ in 0..MAX_BALANCE_PASSES {
        let mut moved = false;
        for (t, size, subscribers) in &topics {
            if subscribers.len() >= 2 {
                moved |= balance_topic(
                    spec,
                    &part.members,
                    *t,
                    *size,
                    subscribers,
                    owner,
                    &mut load,
                );
            }
        }
        if !moved {
            break;
        }
    }
    // Each member's partitions, ascending: count, then fill in global order.
    let mut start = vec![0u32; n + 1];
    for i in 0..n {
        start[i + 1] = start[i] + load[i];
    }
    let mut fill = start.clone();
    let mut all = vec![0u32; start[n] as usize];
    for &t in &part.topics {
        let base = spec.topics.base(t);
        for g in base..base + spec.topics.size(t) {
            let i = owner[g as usize] as usize;
            all[fill[i] as usize] = g;
            fill[i] += 1;
        }
    }
    for (i, &m) in part.members.iter().enumerate() {
        out.set(spec, m, &all[start[i] as usize..start[i + 1] as usize]);
    }
}

/// One topic's balancing step (see [`mixed`]); whether it moved anything. `members` maps the
/// part's local member numbers (in `owner`, `load`, `subscribers`) to the spec's.
fn balance_topic(
    spec: &AssignSpec,
    members: &[u32],
    t: u32,
    size: u32,
    subscribers: &[u32],
    owner: &mut [u32],
    load: &mut [u32],
) -> bool {
    let lo_load = subscribers
        .iter()
        .map(|i| load[*i as usize])
        .min()
        .unwrap_or(0);
    let base = spec.topics.base(t);
    let hi_load = (base..base + size)
        .map(|g| load[owner[g as usize] as usize])
        .max()
        .unwrap_or(0);
    if hi_load <= lo_load + 1 {
        return false;
    }
    // Holders of the topic, each with its partitions of it ordered so that the end (given up
    // first) holds those it did not have before this call: kept partitions move last.
    let mut held: hashbrown::HashMap<u32, Vec<u32>> = hashbrown::HashMap::new();
    for g in base..base + size {
        held.entry(owner[g as usize]).or_default().push(g);
    }
    for (&i, list) in held.iter_mut() {
        let prev = spec.previous(members[i as usize]);
        list.sort_by_key(|g| (prev.binary_search(g).is_err(), *g));
    }
    // Heaps with lazy deletion: an entry is current while its load is the member's load.
    let mut lo: BinaryHeap<Reverse<(u32, u32)>> = subscribers
        .iter()
        .map(|&i| Reverse((load[i as usize], i)))
        .collect();
    let mut hi: BinaryHeap<(u32, Reverse<u32>)> = held
        .keys()
        .map(|&i| (load[i as usize], Reverse(i)))
        .collect();
    let mut moved = false;
    loop {
        let (l_lo, i_lo) = loop {
            let Reverse((l, i)) = *lo.peek().expect("a topic here has subscribers");
            if l == load[i as usize] {
                break (l, i);
            }
            lo.pop();
        };
        let (l_hi, i_hi) = loop {
            let Some(&(l, Reverse(i))) = hi.peek() else {
                return moved;
            };
            if l == load[i as usize] && held.get(&i).is_some_and(|v| !v.is_empty()) {
                break (l, i);
            }
            hi.pop();
        };
        if l_hi <= l_lo + 1 {
            return moved;
        }
        let g = held
            .get_mut(&i_hi)
            .and_then(|v| v.pop())
            .expect("a holder has a partition");
        owner[g as usize] = i_lo;
        load[i_hi as usize] -= 1;
        load[i_lo as usize] += 1;
        held.entry(i_lo).or_default().push(g);
        lo.push(Reverse((load[i_lo as usize], i_lo)));
        hi.push((load[i_lo as usize], Reverse(i_lo)));
        hi.push((load[i_hi as usize], Reverse(i_hi)));
        moved = true;
    }
}
