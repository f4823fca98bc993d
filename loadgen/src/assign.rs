//! The embedded consumer protocol as loadgen's members use it (the bytes themselves are
//! `wire::consumer_protocol`'s) and the client-side range assignor the group leader runs
//! (reference §1.5 "Embedded consumer protocol", §5.3).

use bytes::Bytes;
use kafka_protocol::protocol::StrBytes;
use std::collections::BTreeMap;
use wire::consumer_protocol;

/// The version written in front of subscriptions and assignments (what Java 3.x+ clients write).
pub const CONSUMER_PROTOCOL_VERSION: i16 = consumer_protocol::VERSION;
/// The protocol type of consumer groups.
pub const PROTOCOL_TYPE: &str = "consumer";
/// The assignor loadgen's members offer (and run, when they lead).
pub const ASSIGNOR: &str = "range";

/// A topic as the members know it: its name and partition count.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TopicInfo {
    pub name: StrBytes,
    pub partitions: i32,
    /// The topic id from Metadata v10+ (nil when the broker did not say); KIP-848
    /// ConsumerGroupHeartbeat names topics by id.
    pub id: uuid::Uuid,
}

/// One assigned partition: (index into the topic table, partition).
pub type Assigned = (u16, i32);

/// Encode a subscription to `topics` (no owned partitions, generation -1).
pub fn encode_subscription(topics: &[TopicInfo]) -> Bytes {
    consumer_protocol::encode_subscription(
        topics.iter().map(|t| t.name.clone()),
        CONSUMER_PROTOCOL_VERSION,
    )
}

/// Decode a member's subscription metadata; returns the subscribed topic names. Newer versions
/// than we know are read by their known prefix, as Kafka's parsers do.
pub fn decode_subscription(bytes: &Bytes) -> anyhow::Result<Vec<StrBytes>> {
    let sub = consumer_protocol::decode_subscription(bytes)
        .map_err(|e| anyhow::anyhow!("subscription: {e}"))?;
    Ok(sub.topics)
}

/// Encode an assignment.
pub fn encode_assignment(assigned: &[(StrBytes, Vec<i32>)]) -> Bytes {
    consumer_protocol::encode_assignment(assigned.iter().cloned(), CONSUMER_PROTOCOL_VERSION)
}

/// Decode the assignment a SyncGroup response carries into (topic index, partition) pairs.
/// Topics the member does not know are skipped. Empty bytes (a member with nothing) are valid.
pub fn decode_assignment(bytes: &Bytes, topics: &[TopicInfo]) -> anyhow::Result<Vec<Assigned>> {
    if bytes.is_empty() {
        return Ok(Vec::new());
    }
    let a = consumer_protocol::decode_assignment(bytes)
        .map_err(|e| anyhow::anyhow!("assignment: {e}"))?;
    let mut out = Vec::new();
    for tp in a.assigned_partitions {
        if let Some(ti) = topics.iter().position(|t| t.name == tp.topic.0) {
            out.extend(tp.partitions.iter().map(|&p| (ti as u16, p)));
        }
    }
    out.sort_unstable();
    Ok(out)
}

/// The client `RangeAssignor`: per topic, partitions in order; subscribers sorted by member id;
/// each gets `n / m` contiguous partitions and the first `n % m` one more. `members` is
/// (member id, subscribed topic names); `topics` gives partition counts. Topics nobody knows are
/// ignored. Returns member id → [(topic, partitions)] with an entry for every member.
pub fn range_assign(
    members: &[(StrBytes, Vec<StrBytes>)],
    topics: &[TopicInfo],
) -> BTreeMap<StrBytes, Vec<(StrBytes, Vec<i32>)>> {
    let mut out: BTreeMap<StrBytes, Vec<(StrBytes, Vec<i32>)>> = members
        .iter()
        .map(|(id, _)| (id.clone(), Vec::new()))
        .collect();
    for topic in topics {
        let mut subs: Vec<&StrBytes> = members
            .iter()
            .filter(|(_, t)| t.contains(&topic.name))
            .map(|(id, _)| id)
            .collect();
        if subs.is_empty() {
            continue;
        }
        subs.sort();
        subs.dedup();
        let n = topic.partitions.max(0) as usize;
        let m = subs.len();
        let (quota, extra) = (n / m, n % m);
        let mut next = 0usize;
        for (i, id) in subs.into_iter().enumerate() {
            let take = quota + usize::from(i < extra);
            if take == 0 {
                continue;
            }
            let parts: Vec<i32> = (next..next + take).map(|p| p as i32).collect();
            next += take;
            if let Some(v) = out.get_mut(id) {
                v.push((topic.name.clone(), parts));
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(x: &str) -> StrBytes {
        StrBytes::from_string(x.to_string())
    }

    fn topics() -> Vec<TopicInfo> {
        vec![
            TopicInfo {
                name: s("t0"),
                partitions: 7,
                id: uuid::Uuid::nil(),
            },
            TopicInfo {
                name: s("t1"),
                partitions: 2,
                id: uuid::Uuid::nil(),
            },
        ]
    }

    #[test]
    fn range_assignment_matches_the_java_assignor() {
        // Three members (deliberately unsorted) on t0 (7 partitions): 3, 2, 2 by member id order.
        // t1 (2 partitions): the first two members get one each, the third nothing.
        let members = vec![
            (s("c-member"), vec![s("t0"), s("t1")]),
            (s("a-member"), vec![s("t0"), s("t1")]),
            (s("b-member"), vec![s("t0"), s("t1")]),
        ];
        let a = range_assign(&members, &topics());
        assert_eq!(
            a[&s("a-member")],
            vec![(s("t0"), vec![0, 1, 2]), (s("t1"), vec![0])]
        );
        assert_eq!(
            a[&s("b-member")],
            vec![(s("t0"), vec![3, 4]), (s("t1"), vec![1])]
        );
        assert_eq!(a[&s("c-member")], vec![(s("t0"), vec![5, 6])]);
    }

    #[test]
    fn only_subscribers_share_a_topic() {
        let members = vec![(s("x"), vec![s("t1")]), (s("y"), vec![s("t0")])];
        let a = range_assign(&members, &topics());
        assert_eq!(a[&s("x")], vec![(s("t1"), vec![0, 1])]);
        assert_eq!(a[&s("y")], vec![(s("t0"), (0..7).collect())]);
        // Every partition assigned exactly once.
        let total: usize = a.values().flatten().map(|(_, p)| p.len()).sum();
        assert_eq!(total, 9);
    }

    #[test]
    fn more_members_than_partitions_leaves_some_empty() {
        let members: Vec<_> = (0..5)
            .map(|i| (s(&format!("m{i}")), vec![s("t1")]))
            .collect();
        let a = range_assign(&members, &topics());
        assert_eq!(a.len(), 5);
        assert_eq!(a.values().filter(|v| v.is_empty()).count(), 3);
    }

    #[test]
    fn subscription_and_assignment_round_trip_with_version_prefix() {
        let t = topics();
        let sub = encode_subscription(&t);
        assert_eq!(&sub[..2], &CONSUMER_PROTOCOL_VERSION.to_be_bytes());
        assert_eq!(decode_subscription(&sub).unwrap(), vec![s("t0"), s("t1")]);

        let enc = encode_assignment(&[(s("t1"), vec![1]), (s("t0"), vec![4, 5])]);
        assert_eq!(&enc[..2], &3i16.to_be_bytes());
        assert_eq!(
            decode_assignment(&enc, &t).unwrap(),
            vec![(0, 4), (0, 5), (1, 1)]
        );
        assert_eq!(decode_assignment(&Bytes::new(), &t).unwrap(), vec![]);
        assert!(decode_assignment(&Bytes::from_static(&[0]), &t).is_err());
    }

    #[test]
    fn reads_a_v0_subscription_from_another_client() {
        let v0 = consumer_protocol::encode_subscription([s("t0")], 0);
        assert_eq!(decode_subscription(&v0).unwrap(), vec![s("t0")]);
    }
}
