//! `range` (`RangeAssignor`): per topic, its subscribers in range order (static members by
//! instance id first, then the others in member order) take contiguous ranges, the first
//! `partitions % subscribers` one partition more. When every member subscribes to the same
//! topics of equal size each gets the same partition numbers of every topic (co-partitioning).
//! Not sticky: the previous target only decides which members changed.

use super::{AssignSpec, Outcome};

/// The range assignment of `spec`. O(members + partitions + topics × subscriptions).
pub fn range(spec: &AssignSpec) -> Outcome {
    let m = spec.members();
    let mut out = Outcome::new(m);
    if m == 0 {
        return out;
    }
    let identity: Vec<u32>;
    let order: &[u32] = match &spec.range_order {
        Some(o) => o,
        None => {
            identity = (0..m as u32).collect();
            &identity
        }
    };
    let first = spec.member_sub[0];
    if spec.member_sub.iter().all(|s| *s == first) {
        homogeneous(spec, order, &spec.subs[first as usize], &mut out);
        return out;
    }
    // Subscribers of each topic in range order: the members of each subscription in range
    // order, and the subscriptions of each topic.
    let mut sub_members: Vec<Vec<u32>> = vec![Vec::new(); spec.subs.len()];
    for &i in order {
        sub_members[spec.member_sub[i as usize] as usize].push(i);
    }
    let mut topic_subs: Vec<Vec<u32>> = vec![Vec::new(); spec.topics.len()];
    for (s, topics) in spec.subs.iter().enumerate() {
        if sub_members[s].is_empty() {
            continue;
        }
        for &t in topics.iter() {
            topic_subs[t as usize].push(s as u32);
        }
    }
    let mut rank = Vec::new();
    let mut merged: Vec<u32> = Vec::new();
    // Each topic's grant: (topic, partitions per member, how many get one more, receivers).
    // Receivers are a prefix of the topic's subscribers in range order.
    let mut count = vec![0u32; m];
    let mut grants: Vec<(u32, u32, u32, usize, usize)> = Vec::new(); // (t, quota, extra, from, len) into `receivers`
    let mut receivers: Vec<u32> = Vec::new();
    for (t, subs) in topic_subs.iter().enumerate() {
        let size = spec.topics.size(t as u32);
        if subs.is_empty() || size == 0 {
            continue;
        }
        let subscribers: &[u32] = if subs.len() == 1 {
            &sub_members[subs[0] as usize]
        } else {
            if rank.is_empty() {
                rank = vec![0u32; m];
                for (r, &i) in order.iter().enumerate() {
                    rank[i as usize] = r as u32;
                }
            }
            merged.clear();
            merged.extend(
                subs.iter()
                    .flat_map(|s| sub_members[*s as usize].iter().copied()),
            );
            merged.sort_unstable_by_key(|i| rank[*i as usize]);
            &merged
        };
        let n = subscribers.len() as u32;
        let (quota, extra) = (size / n, size % n);
        let getting = if quota == 0 { extra } else { n } as usize;
        let from = receivers.len();
        for (j, &i) in subscribers[..getting].iter().enumerate() {
            count[i as usize] += quota + u32::from((j as u32) < extra);
            receivers.push(i);
        }
        grants.push((t as u32, quota, extra, from, getting));
    }
    // Lay each member's partitions out in topic order (ascending global indexes).
    let mut start = vec![0u32; m + 1];
    for i in 0..m {
        start[i + 1] = start[i] + count[i];
    }
    let mut fill = start.clone();
    let mut all = vec![0u32; start[m] as usize];
    for &(t, quota, extra, from, len) in &grants {
        let base = spec.topics.base(t);
        let mut next = base;
        for (j, &i) in receivers[from..from + len].iter().enumerate() {
            let take = quota + u32::from((j as u32) < extra);
            let at = fill[i as usize] as usize;
            for (k, g) in (next..next + take).enumerate() {
                all[at + k] = g;
            }
            fill[i as usize] += take;
            next += take;
        }
    }
    for i in 0..m as u32 {
        out.set(
            spec,
            i,
            &all[start[i as usize] as usize..start[i as usize + 1] as usize],
        );
    }
    out
}

/// Every member subscribes to `topics`: the member at position `j` of `order` gets, of a topic
/// with P partitions, `P / M` from `j · (P / M) + min(j, P % M)`, plus one if `j < P % M`. Each
/// member's target is written in one go, topic after topic; only the first positions get
/// anything when topics have fewer partitions than the group has members.
fn homogeneous(spec: &AssignSpec, order: &[u32], topics: &[u32], out: &mut Outcome) {
    let n = order.len() as u32;
    // (base, quota, extra) per topic.
    let shares: Vec<(u32, u32, u32)> = topics
        .iter()
        .map(|&t| {
            let size = spec.topics.size(t);
            (spec.topics.base(t), size / n, size % n)
        })
        .collect();
    let getting = shares
        .iter()
        .map(|&(_, q, e)| if q == 0 { e } else { n })
        .max()
        .unwrap_or(0);
    for (j, &m) in order.iter().enumerate() {
        let j = j as u32;
        let start = out.parts.len();
        if j < getting {
            for &(base, q, e) in &shares {
                let take = q + u32::from(j < e);
                if take > 0 {
                    let from = base + j * q + j.min(e);
                    out.parts.extend(from..from + take);
                }
            }
        }
        out.finish(spec, m, start);
    }
}
