//! The classic `consumer` embedded protocol: the bytes a consumer puts in JoinGroup's member
//! metadata (`ConsumerProtocolSubscription`) and a leader puts in SyncGroup's assignments
//! (`ConsumerProtocolAssignment`) — an int16 version, then the struct at that version.
//!
//! One implementation for everyone who reads or writes them: the coordinator (subscribed topics
//! of classic members), the `groups` tool, the simulator's clients, loadgen and the benchmarks.
//! Decoding never panics and never allocates more than the bytes justify: a newer version is read
//! by the prefix this build knows (as Kafka's `ConsumerProtocol` does), a negative version is an
//! error, and array lengths are checked against the bytes before the generated decoder sees them.

use bytes::{BufMut, Bytes, BytesMut};
use kafka_protocol::messages::consumer_protocol_assignment::TopicPartition;
use kafka_protocol::messages::{
    ConsumerProtocolAssignment, ConsumerProtocolSubscription, TopicName,
};
use kafka_protocol::protocol::{Decodable, Encodable, StrBytes};

/// The newest version this build reads and writes (Kafka 4.x clients send 3).
pub const VERSION: i16 = 3;

/// `message` with its version prefix.
pub fn encode<M: Encodable>(message: &M, version: i16) -> Bytes {
    let mut buf = BytesMut::with_capacity(64);
    buf.put_i16(version);
    // Both messages encode at every version 0-3; an error is a bug in the fields set.
    message
        .encode(&mut buf, version)
        .expect("consumer protocol messages encode at versions 0-3");
    buf.freeze()
}

/// A subscription to `topics` (no owned partitions, no user data).
pub fn encode_subscription(topics: impl IntoIterator<Item = StrBytes>, version: i16) -> Bytes {
    let sub = ConsumerProtocolSubscription::default().with_topics(topics.into_iter().collect());
    encode(&sub, version)
}

/// An assignment of `(topic, partitions)`.
pub fn encode_assignment(
    assigned: impl IntoIterator<Item = (StrBytes, Vec<i32>)>,
    version: i16,
) -> Bytes {
    let a = ConsumerProtocolAssignment::default().with_assigned_partitions(
        assigned
            .into_iter()
            .map(|(topic, partitions)| {
                TopicPartition::default()
                    .with_topic(TopicName(topic))
                    .with_partitions(partitions)
            })
            .collect(),
    );
    encode(&a, version)
}

/// Why consumer protocol bytes did not decode.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ConsumerProtocolError {
    #[error("shorter than its version")]
    Short,
    #[error("negative version {0}")]
    NegativeVersion(i16),
    #[error("an array length exceeds the bytes left")]
    ImplausibleLength,
    #[error("{0}")]
    Malformed(String),
}

fn split_version(bytes: &[u8]) -> Result<(i16, &[u8]), ConsumerProtocolError> {
    if bytes.len() < 2 {
        return Err(ConsumerProtocolError::Short);
    }
    let version = i16::from_be_bytes([bytes[0], bytes[1]]);
    if version < 0 {
        return Err(ConsumerProtocolError::NegativeVersion(version));
    }
    Ok((version.min(VERSION), &bytes[2..]))
}

fn decode_body<M: Decodable>(body: &[u8], version: i16) -> Result<M, ConsumerProtocolError> {
    let mut buf = Bytes::copy_from_slice(body);
    match crate::guard::contain(|| M::decode(&mut buf, version)) {
        Ok(Ok(m)) => Ok(m),
        Ok(Err(e)) => Err(ConsumerProtocolError::Malformed(format!("{e:#}"))),
        Err(_) => Err(ConsumerProtocolError::Malformed(
            "the decoder gave up on a length".into(),
        )),
    }
}

/// A member's subscription metadata.
pub fn decode_subscription(
    bytes: &[u8],
) -> Result<ConsumerProtocolSubscription, ConsumerProtocolError> {
    let (version, body) = split_version(bytes)?;
    // topics: an int32 count of int16-length strings, each at least 2 bytes.
    if !array_plausible(body, 2) {
        return Err(ConsumerProtocolError::ImplausibleLength);
    }
    decode_body(body, version)
}

/// An assignment (non-empty bytes; an empty assignment is the caller's to interpret, as Kafka's
/// clients treat it as "nothing assigned").
pub fn decode_assignment(
    bytes: &[u8],
) -> Result<ConsumerProtocolAssignment, ConsumerProtocolError> {
    let (version, body) = split_version(bytes)?;
    if !assignment_lengths_plausible(body) {
        return Err(ConsumerProtocolError::ImplausibleLength);
    }
    decode_body(body, version)
}

/// Whether an int32 element count at the start of `b` fits the bytes after it, at
/// `min_element` bytes per element (-1, a null array, is fine).
fn array_plausible(b: &[u8], min_element: usize) -> bool {
    let Some(n) = b
        .get(0..4)
        .map(|x| i32::from_be_bytes([x[0], x[1], x[2], x[3]]))
    else {
        return false;
    };
    n == -1 || (n >= 0 && n as usize <= (b.len() - 4) / min_element)
}

/// Walk `[topics: int32 count, {name: int16 len + bytes, partitions: int32 count + int32s}]`
/// checking every count against the bytes left (the layout every version starts with).
fn assignment_lengths_plausible(b: &[u8]) -> bool {
    fn i32_at(b: &[u8], pos: usize) -> Option<i32> {
        Some(i32::from_be_bytes(b.get(pos..pos + 4)?.try_into().ok()?))
    }
    let Some(topics) = i32_at(b, 0) else {
        return false;
    };
    if topics < 0 {
        return topics == -1;
    }
    let mut pos = 4usize;
    // Each topic needs at least 6 bytes (empty name + partition count).
    if topics as usize > (b.len() - pos) / 6 {
        return false;
    }
    for _ in 0..topics {
        let Some(name) = b.get(pos..pos + 2) else {
            return false;
        };
        let name_len = i16::from_be_bytes([name[0], name[1]]);
        if name_len < 0 {
            return false;
        }
        pos += 2 + name_len as usize;
        let Some(parts) = i32_at(b, pos) else {
            return false;
        };
        pos += 4;
        if parts < 0 || parts as usize > b.len().saturating_sub(pos) / 4 {
            return false;
        }
        pos += 4 * parts as usize;
    }
    pos <= b.len()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(x: &'static str) -> StrBytes {
        StrBytes::from_static_str(x)
    }

    #[test]
    fn every_version_round_trips() {
        for v in 0..=VERSION {
            let sub = decode_subscription(&encode_subscription([s("a"), s("b")], v)).unwrap();
            assert_eq!(sub.topics, [s("a"), s("b")]);
            let a = decode_assignment(&encode_assignment([(s("a"), vec![0, 2])], v)).unwrap();
            assert_eq!(a.assigned_partitions[0].topic.0, s("a"));
            assert_eq!(a.assigned_partitions[0].partitions, [0, 2]);
        }
    }

    #[test]
    fn a_newer_version_is_read_by_its_known_prefix() {
        let mut bytes = encode_subscription([s("t")], VERSION).to_vec();
        bytes[0..2].copy_from_slice(&9i16.to_be_bytes());
        bytes.extend_from_slice(&[0, 0, 0, 0]); // a field this build does not know
        assert_eq!(decode_subscription(&bytes).unwrap().topics, [s("t")]);
    }

    #[test]
    fn lying_lengths_and_bad_versions_are_errors_not_panics() {
        assert_eq!(decode_assignment(&[0]), Err(ConsumerProtocolError::Short));
        assert_eq!(
            decode_assignment(&(-1i16).to_be_bytes()),
            Err(ConsumerProtocolError::NegativeVersion(-1))
        );
        let mut lie = 0i16.to_be_bytes().to_vec();
        lie.extend_from_slice(&i32::MAX.to_be_bytes());
        assert_eq!(
            decode_assignment(&lie),
            Err(ConsumerProtocolError::ImplausibleLength)
        );
        assert_eq!(
            decode_subscription(&lie),
            Err(ConsumerProtocolError::ImplausibleLength)
        );
    }
}
