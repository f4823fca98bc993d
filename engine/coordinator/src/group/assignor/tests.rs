//! The assignors' properties on random groups, and the reference model (the implementation
//! before the index-based rewrite, `reference.rs`) where both define the result the same way.

use super::reference::{self, AssignMember};
use super::*;
use proptest::prelude::*;

/// One member of a test group: id, instance id, subscribed topic ids (existing or not).
#[derive(Debug, Clone)]
struct Member {
    id: String,
    instance: Option<String>,
    topics: BTreeSet<Uuid>,
}

fn m(id: &str, topics: &[Uuid]) -> Member {
    Member {
        id: id.into(),
        instance: None,
        topics: topics.iter().copied().collect(),
    }
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum Kind {
    Uniform,
    Range,
}

/// The spec the coordinator would build: the table holds the subscribed topics that exist.
fn spec_of(
    members: &[Member],
    partitions: &BTreeMap<Uuid, i32>,
    previous: &BTreeMap<String, Assignment>,
) -> AssignSpec {
    let subscribed: BTreeSet<Uuid> = members
        .iter()
        .flat_map(|m| m.topics.iter().copied())
        .filter(|t| partitions.contains_key(t))
        .collect();
    let table = TopicTable::new(subscribed.iter().map(|t| (*t, partitions[t])));
    let mut b = SpecBuilder::new(table);
    for mm in members {
        let topics: Vec<u32> = mm
            .topics
            .iter()
            .filter_map(|t| b.topics().find(t))
            .collect();
        let sub = b.subscription(topics);
        let prev = previous.get(&mm.id).map(|a| {
            a.iter()
                .map(|(t, ps)| (*t, ps.iter().copied().collect::<Vec<i32>>()))
                .collect::<Vec<_>>()
        });
        b.member(
            sub,
            mm.instance.as_deref(),
            prev.as_ref()
                .map(|v| v.iter().map(|(t, ps)| (*t, ps.as_slice()))),
        );
    }
    b.build()
}

fn to_assignment(table: &TopicTable, parts: &[u32]) -> Assignment {
    table
        .runs(parts)
        .map(|(t, run)| {
            let base = table.base(t);
            (table.id(t), run.iter().map(|g| (g - base) as i32).collect())
        })
        .collect()
}

/// Every member's target after the assignment, and the members reported changed.
fn assign(
    kind: Kind,
    members: &[Member],
    partitions: &BTreeMap<Uuid, i32>,
    previous: &BTreeMap<String, Assignment>,
) -> (BTreeMap<String, Assignment>, BTreeSet<String>) {
    let spec = spec_of(members, partitions, previous);
    let out = match kind {
        Kind::Uniform => uniform(&spec),
        Kind::Range => range(&spec),
    };
    let all = members
        .iter()
        .enumerate()
        .map(|(i, mm)| {
            (
                mm.id.clone(),
                to_assignment(spec.topics(), out.target(&spec, i as u32)),
            )
        })
        .collect();
    let changed = out
        .changed()
        .map(|(i, _)| members[i as usize].id.clone())
        .collect();
    (all, changed)
}

fn reference_members(members: &[Member], partitions: &BTreeMap<Uuid, i32>) -> Vec<AssignMember> {
    members
        .iter()
        .map(|mm| AssignMember {
            member_id: mm.id.clone(),
            instance_id: mm.instance.clone(),
            topics: mm
                .topics
                .iter()
                .filter(|t| partitions.contains_key(*t))
                .copied()
                .collect(),
        })
        .collect()
}

/// `reference::uniform`'s and `reference::range`'s partition map: subscribed existing topics.
fn reference_partitions(
    members: &[Member],
    partitions: &BTreeMap<Uuid, i32>,
) -> BTreeMap<Uuid, i32> {
    partitions
        .iter()
        .filter(|(t, _)| members.iter().any(|m| m.topics.contains(t)))
        .map(|(t, n)| (*t, *n))
        .collect()
}

#[test]
fn uniform_is_sticky_and_balanced_for_the_seed() {
    let t = Uuid::from_u128(7);
    let parts = BTreeMap::from([(t, 6)]);
    let (a_only, _) = assign(Kind::Uniform, &[m("A", &[t])], &parts, &BTreeMap::new());
    assert_eq!(
        a_only["A"][&t].iter().copied().collect::<Vec<_>>(),
        vec![0, 1, 2, 3, 4, 5]
    );
    let (both, changed) = assign(
        Kind::Uniform,
        &[m("A", &[t]), m("B", &[t])],
        &parts,
        &a_only,
    );
    assert_eq!(
        both["A"][&t].iter().copied().collect::<Vec<_>>(),
        vec![0, 1, 2]
    );
    assert_eq!(
        both["B"][&t].iter().copied().collect::<Vec<_>>(),
        vec![3, 4, 5]
    );
    assert_eq!(changed, BTreeSet::from(["A".into(), "B".into()]));
    // Run again on its own result: nothing changes.
    let (again, changed) = assign(Kind::Uniform, &[m("A", &[t]), m("B", &[t])], &parts, &both);
    assert_eq!(again, both);
    assert!(changed.is_empty());
}

#[test]
fn uniform_balances_heterogeneous_and_never_double_assigns() {
    let (t1, t2) = (Uuid::from_u128(1), Uuid::from_u128(2));
    let parts = BTreeMap::from([(t1, 5), (t2, 3)]);
    let members = [m("A", &[t1]), m("B", &[t1, t2]), m("C", &[t2])];
    let (out, _) = assign(Kind::Uniform, &members, &parts, &BTreeMap::new());
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
fn range_is_contiguous_with_static_members_first() {
    let t = Uuid::from_u128(3);
    let parts = BTreeMap::from([(t, 7)]);
    let mut s = m("z-member", &[t]);
    s.instance = Some("i-1".into());
    let (out, _) = assign(
        Kind::Range,
        &[m("a", &[t]), s, m("b", &[t])],
        &parts,
        &BTreeMap::new(),
    );
    assert_eq!(
        out["z-member"][&t].iter().copied().collect::<Vec<_>>(),
        vec![0, 1, 2]
    );
    assert_eq!(out["a"][&t].iter().copied().collect::<Vec<_>>(), vec![3, 4]);
    assert_eq!(out["b"][&t].iter().copied().collect::<Vec<_>>(), vec![5, 6]);
}

#[test]
fn a_member_without_a_previous_target_is_always_written() {
    // No previous target at all is not the same as an empty one: the coordinator writes a
    // target record for a new member even when it gets nothing.
    let t = Uuid::from_u128(1);
    let parts = BTreeMap::from([(t, 1)]);
    let members = [m("A", &[t]), m("B", &[t])];
    let (_, changed) = assign(Kind::Uniform, &members, &parts, &BTreeMap::new());
    assert_eq!(changed.len(), 2);
    let prev = BTreeMap::from([
        ("A".to_string(), BTreeMap::from([(t, BTreeSet::from([0]))])),
        ("B".to_string(), Assignment::new()),
    ]);
    let (_, changed) = assign(Kind::Uniform, &members, &parts, &prev);
    assert!(changed.is_empty(), "{changed:?}");
    // A previous target naming a partition that no longer exists is rewritten.
    let prev = BTreeMap::from([
        (
            "A".to_string(),
            BTreeMap::from([(t, BTreeSet::from([0, 5]))]),
        ),
        ("B".to_string(), Assignment::new()),
    ]);
    let (out, changed) = assign(Kind::Uniform, &members, &parts, &prev);
    assert_eq!(changed, BTreeSet::from(["A".to_string()]));
    assert_eq!(out["A"], BTreeMap::from([(t, BTreeSet::from([0]))]));
}

#[test]
fn topic_runs_and_packing_follow_topic_id_order() {
    let (a, b, c) = (
        Uuid::from_u128(30),
        Uuid::from_u128(10),
        Uuid::from_u128(20),
    );
    let table = TopicTable::new([(a, 3), (b, 0), (c, 2)]);
    assert_eq!(table.ids(), &[b, c, a]);
    assert_eq!(table.total(), 5);
    assert_eq!((table.base(1), table.size(1)), (0, 2));
    // c:0, c:1, a:2
    let parts = [0, 1, 4];
    let runs: Vec<(u32, Vec<u32>)> = table.runs(&parts).map(|(t, r)| (t, r.to_vec())).collect();
    assert_eq!(runs, vec![(1, vec![0, 1]), (2, vec![4])]);
    let packed = PackedAssignment::from_globals(&table, &parts);
    let want: Assignment = BTreeMap::from([(c, BTreeSet::from([0, 1])), (a, BTreeSet::from([2]))]);
    assert_eq!(packed, PackedAssignment::new(&want));
    assert_eq!(to_assignment(&table, &parts), want);
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

// ---- random groups -------------------------------------------------------------------------

/// A random group: 1–6 topics of 0–12 partitions (one id in the subscriptions does not exist),
/// 1–9 members, some static, and a random previous target per member (overlapping, with
/// partitions and topics that do not exist). `homogeneous` gives everyone the same topics.
#[derive(Debug, Clone)]
struct Case {
    partitions: BTreeMap<Uuid, i32>,
    members: Vec<Member>,
    previous: BTreeMap<String, Assignment>,
}

fn case(homogeneous: bool, clean_previous: bool) -> impl Strategy<Value = Case> {
    (1usize..7, 1usize..10).prop_flat_map(move |(n_topics, n_members)| {
        let sizes = proptest::collection::vec(0i32..13, n_topics);
        let subs = proptest::collection::vec(
            proptest::collection::vec(any::<bool>(), n_topics + 1),
            n_members,
        );
        let statics = proptest::collection::vec(proptest::option::of(0u8..4), n_members);
        let prev = proptest::collection::vec(
            proptest::option::of(proptest::collection::vec(
                (0..n_topics + 1, 0i32..15),
                0..12,
            )),
            n_members,
        );
        (sizes, subs, statics, prev).prop_map(move |(sizes, subs, statics, prev)| {
            // Ids out of index order, so that topic-id order differs from creation order.
            let ids: Vec<Uuid> = (0..=n_topics)
                .map(|i| Uuid::from_u128(((i as u128 * 7919) % 101) << 64 | i as u128))
                .collect();
            let partitions: BTreeMap<Uuid, i32> = sizes
                .iter()
                .enumerate()
                .map(|(i, n)| (ids[i], *n))
                .collect();
            let mut members: Vec<Member> = subs
                .iter()
                .enumerate()
                .map(|(i, pick)| Member {
                    id: format!("m{i}"),
                    // Distinct instance ids, in an order unrelated to member ids.
                    instance: statics[i].map(|k| format!("i{k}-{}", n_members - i)),
                    topics: pick
                        .iter()
                        .enumerate()
                        .filter(|(_, on)| **on)
                        .map(|(t, _)| ids[t])
                        .collect(),
                })
                .collect();
            if homogeneous {
                let topics = members[0].topics.clone();
                for mm in &mut members {
                    mm.topics = topics.clone();
                }
            }
            let mut previous = BTreeMap::new();
            let mut claimed = BTreeSet::new();
            for (i, p) in prev.iter().enumerate() {
                let Some(p) = p else { continue };
                let mut a = Assignment::new();
                for &(t, part) in p {
                    let id = ids[t];
                    if clean_previous {
                        // Only partitions that exist, of subscribed topics, at most one owner.
                        let ok = partitions.get(&id).is_some_and(|n| part < *n)
                            && members[i].topics.contains(&id)
                            && claimed.insert((id, part));
                        if !ok {
                            continue;
                        }
                    }
                    a.entry(id).or_default().insert(part);
                }
                previous.insert(members[i].id.clone(), a);
            }
            Case {
                partitions,
                members,
                previous,
            }
        })
    })
}

/// Every partition of a topic someone subscribes to is assigned exactly once, to a subscriber;
/// nothing else is assigned.
fn check_exactly_once(c: &Case, out: &BTreeMap<String, Assignment>) -> Result<(), TestCaseError> {
    let mut owner: BTreeMap<(Uuid, i32), &str> = BTreeMap::new();
    for mm in &c.members {
        for (t, ps) in &out[&mm.id] {
            prop_assert!(
                mm.topics.contains(t),
                "{} got unsubscribed topic {t}",
                mm.id
            );
            for &p in ps {
                prop_assert!((0..c.partitions[t]).contains(&p), "{t}:{p} does not exist");
                let prev = owner.insert((*t, p), &mm.id);
                prop_assert!(prev.is_none(), "{t}:{p} assigned twice");
            }
        }
    }
    for (t, n) in &c.partitions {
        if c.members.iter().any(|mm| mm.topics.contains(t)) {
            for p in 0..*n {
                prop_assert!(owner.contains_key(&(*t, p)), "{t}:{p} unassigned");
            }
        }
    }
    Ok(())
}

fn load(a: &Assignment) -> usize {
    count(a)
}

/// Kafka's balance condition: for every topic with two or more subscribers, no member holding
/// one of its partitions has more than one partition more than any of its subscribers.
fn check_balance(c: &Case, out: &BTreeMap<String, Assignment>) -> Result<(), TestCaseError> {
    for t in c.partitions.keys() {
        let subs: Vec<&Member> = c.members.iter().filter(|m| m.topics.contains(t)).collect();
        if subs.len() < 2 {
            continue;
        }
        let lo = subs.iter().map(|m| load(&out[&m.id])).min().unwrap();
        for mm in &subs {
            if out[&mm.id].get(t).is_some_and(|ps| !ps.is_empty()) {
                prop_assert!(
                    load(&out[&mm.id]) <= lo + 1,
                    "topic {t}: {} holds {} while a subscriber holds {lo}",
                    mm.id,
                    load(&out[&mm.id])
                );
            }
        }
    }
    Ok(())
}

/// The valid part of a member's previous target.
fn valid_previous(c: &Case, mm: &Member) -> BTreeSet<(Uuid, i32)> {
    c.previous
        .get(&mm.id)
        .into_iter()
        .flatten()
        .filter(|(t, _)| mm.topics.contains(*t))
        .flat_map(|(t, ps)| ps.iter().map(move |p| (*t, *p)))
        .filter(|(t, p)| c.partitions.get(t).is_some_and(|n| *p < *n))
        .collect()
}

fn flat(a: &Assignment) -> BTreeSet<(Uuid, i32)> {
    a.iter()
        .flat_map(|(t, ps)| ps.iter().map(move |p| (*t, *p)))
        .collect()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    /// Homogeneous uniform: exactly once, counts within one, sticky up to the quota, and exactly
    /// the reference model's target (which was defined the same way).
    #[test]
    fn uniform_homogeneous(c in case(true, false)) {
        let (out, changed) = assign(Kind::Uniform, &c.members, &c.partitions, &c.previous);
        check_exactly_once(&c, &out)?;
        let counts: Vec<usize> = out.values().map(load).collect();
        prop_assert!(counts.iter().max().unwrap() - counts.iter().min().unwrap() <= 1, "{counts:?}");
        let want = reference::uniform(
            &reference_members(&c.members, &c.partitions),
            &reference_partitions(&c.members, &c.partitions),
            &c.previous,
        );
        prop_assert_eq!(&out, &want);
        // Reported changes are exactly the members whose stored target differs.
        for mm in &c.members {
            let differs = c.previous.get(&mm.id) != Some(&out[&mm.id]);
            prop_assert_eq!(changed.contains(&mm.id), differs, "{}", mm.id);
        }
    }

    /// With a clean previous target (valid, one owner per partition), every member keeps as
    /// many of its partitions as its new share allows, in both subscription kinds for the
    /// homogeneous parts; and running again on the result changes nothing.
    #[test]
    fn uniform_is_sticky_and_stable(c in case(true, true), d in case(false, true)) {
        for c in [c, d] {
            let (out, _) = assign(Kind::Uniform, &c.members, &c.partitions, &c.previous);
            check_exactly_once(&c, &out)?;
            let one_subscription = c.members.iter().all(|m| m.topics == c.members[0].topics);
            if one_subscription {
                for mm in &c.members {
                    let prev = valid_previous(&c, mm);
                    let now = flat(&out[&mm.id]);
                    prop_assert!(
                        prev.intersection(&now).count() >= prev.len().min(now.len()),
                        "{} kept too little: {prev:?} -> {now:?}", mm.id
                    );
                }
            }
            let (again, changed) = assign(Kind::Uniform, &c.members, &c.partitions, &out);
            prop_assert!(changed.is_empty(), "{changed:?}");
            prop_assert_eq!(again, out);
        }
    }

    /// Heterogeneous uniform: exactly once, only to subscribers, Kafka's balance condition.
    #[test]
    fn uniform_heterogeneous(c in case(false, false)) {
        let (out, changed) = assign(Kind::Uniform, &c.members, &c.partitions, &c.previous);
        check_exactly_once(&c, &out)?;
        check_balance(&c, &out)?;
        for mm in &c.members {
            let differs = c.previous.get(&mm.id) != Some(&out[&mm.id]);
            prop_assert_eq!(changed.contains(&mm.id), differs, "{}", mm.id);
        }
    }

    /// Range: exactly once, contiguous, and exactly the reference model's target, static
    /// members included.
    #[test]
    fn range_matches_the_reference(c in case(false, false), h in case(true, false)) {
        for c in [c, h] {
            let (out, changed) = assign(Kind::Range, &c.members, &c.partitions, &c.previous);
            check_exactly_once(&c, &out)?;
            let want = reference::range(
                &reference_members(&c.members, &c.partitions),
                &reference_partitions(&c.members, &c.partitions),
            );
            prop_assert_eq!(&out, &want);
            for mm in &c.members {
                let differs = c.previous.get(&mm.id) != Some(&out[&mm.id]);
                prop_assert_eq!(changed.contains(&mm.id), differs, "{}", mm.id);
            }
        }
    }
}

/// Larger groups than the property tests draw: bucketed (Kafka's heterogeneous benchmark) and
/// overlapping subscriptions, full and after one member joins.
#[test]
fn larger_groups_keep_the_properties() {
    let ids: Vec<Uuid> = (0..40).map(|i| Uuid::from_u128(1000 - i)).collect();
    let partitions: BTreeMap<Uuid, i32> = ids
        .iter()
        .enumerate()
        .map(|(i, t)| (*t, 3 + (i as i32 % 5) * 7))
        .collect();
    for overlapping in [false, true] {
        let mut members: Vec<Member> = (0..97)
            .map(|i| {
                let bucket = i % 5;
                let topics: Vec<Uuid> = if overlapping {
                    // Each member sees its bucket's topics and the next bucket's first topics.
                    ids[bucket * 8..(bucket * 8 + 8 + 3).min(40)].to_vec()
                } else {
                    ids[bucket * 8..bucket * 8 + 8].to_vec()
                };
                m(&format!("member{i:03}"), &topics)
            })
            .collect();
        let c = Case {
            partitions: partitions.clone(),
            members: members.clone(),
            previous: BTreeMap::new(),
        };
        let (out, _) = assign(Kind::Uniform, &c.members, &c.partitions, &c.previous);
        check_exactly_once(&c, &out).unwrap();
        check_balance(&c, &out).unwrap();
        members.push(m(
            "newMember",
            &members[3].topics.iter().copied().collect::<Vec<_>>(),
        ));
        let c = Case {
            partitions: partitions.clone(),
            members,
            previous: out.clone(),
        };
        let (next, changed) = assign(Kind::Uniform, &c.members, &c.partitions, &c.previous);
        check_exactly_once(&c, &next).unwrap();
        check_balance(&c, &next).unwrap();
        assert!(!next["newMember"].is_empty());
        // Only the newcomer and members that gave it something changed.
        for id in &changed {
            if id != "newMember" {
                assert!(
                    load(&next[id]) < load(&out[id]),
                    "{id} changed without giving"
                );
            }
        }
    }
}

proptest! {
    /// The bit set's word-at-a-time operations against a `BTreeSet` model.
    #[test]
    fn bits_match_a_set(
        ops in proptest::collection::vec((0u32..300, 0u32..140, any::<bool>()), 1..40),
        probe in proptest::collection::vec(0u32..300, 0..60),
    ) {
        let mut bits = Bits::new(300);
        let mut model: BTreeSet<u32> = BTreeSet::new();
        for (lo, len, range) in ops {
            let hi = (lo + len).min(300);
            if range {
                let free = (lo..hi).all(|i| !model.contains(&i));
                prop_assert_eq!(bits.claim_range(lo, hi), free);
                if free {
                    model.extend(lo..hi);
                }
            } else {
                let mut parts: Vec<u32> = (lo..hi).step_by(1 + (len as usize % 3)).collect();
                parts.dedup();
                let n = parts.iter().position(|g| model.contains(g)).unwrap_or(parts.len());
                prop_assert_eq!(bits.claim_prefix(&parts), n);
                model.extend(&parts[..n]);
            }
        }
        let mut zeros = Vec::new();
        let (lo, hi) = (probe.iter().min().copied().unwrap_or(0), probe.iter().max().copied().unwrap_or(0));
        bits.push_zeros(lo, hi, &mut zeros);
        let want: Vec<u32> = (lo..hi).filter(|i| !model.contains(i)).collect();
        prop_assert_eq!(zeros, want);
        for g in probe {
            prop_assert_eq!(bits.test_set(g), model.contains(&g));
            model.insert(g);
        }
    }
}
