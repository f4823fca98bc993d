//! The `__consumer_offsets` key and value decoders (`wire::records`): what the group coordinator
//! replays from its log on start-up, and what `ringleader dump-log` prints.
//!
//! Input: byte 0 selects what the rest is. Even: a record key (`RecordKey::decode`). Odd: a
//! record value (`RecordValue::decode_with_version`) under the record type
//! `TYPES[(b0 >> 1) % TYPES.len()]` (every known type, and one unknown type).
//!
//! Checks: decoding never panics (libfuzzer-sys aborts on any panic) and never allocates from an
//! untrusted count (the global allocator is the system one, so a wild reservation is an
//! out-of-memory finding). A key that decodes re-encodes to exactly the input bytes (compaction
//! keys on them). A value that decodes re-encodes at the version it was read at; for the
//! non-flexible versions that is exactly the input, for flexible ones (where unknown tagged
//! fields are dropped and varints may be non-minimal) the re-encoding decodes to the same value.

#![no_main]

use libfuzzer_sys::fuzz_target;
use wire::records::{record_type as rt, RecordKey, RecordValue};

const TYPES: [i16; 11] = [
    rt::LEGACY_OFFSET_COMMIT,
    rt::OFFSET_COMMIT,
    rt::GROUP_METADATA,
    rt::CONSUMER_GROUP_METADATA,
    rt::CONSUMER_GROUP_PARTITION_METADATA,
    rt::CONSUMER_GROUP_MEMBER_METADATA,
    rt::CONSUMER_GROUP_TARGET_ASSIGNMENT_METADATA,
    rt::CONSUMER_GROUP_TARGET_ASSIGNMENT_MEMBER,
    rt::CONSUMER_GROUP_CURRENT_MEMBER_ASSIGNMENT,
    rt::CONSUMER_GROUP_REGULAR_EXPRESSION,
    9, // a share-group type: unknown here
];

/// Whether a value version uses the flexible (compact, tagged) encoding, from the Kafka schemas:
/// OffsetCommitValue and GroupMetadataValue from v4, the KIP-848 values always, the legacy value
/// never.
fn flexible(record_type: i16, version: i16) -> bool {
    match record_type {
        rt::LEGACY_OFFSET_COMMIT => false,
        rt::OFFSET_COMMIT | rt::GROUP_METADATA => version >= 4,
        _ => true,
    }
}

fuzz_target!(|data: &[u8]| {
    let Some((&sel, rest)) = data.split_first() else {
        return;
    };
    if sel & 1 == 0 {
        let Ok(key) = RecordKey::decode(rest) else {
            return;
        };
        assert_eq!(
            i16::from_be_bytes([rest[0], rest[1]]),
            key.record_type(),
            "record type"
        );
        let again = key.to_bytes().expect("a decoded key re-encodes");
        assert_eq!(again, rest, "key bytes changed across re-encoding: {key:?}");
        return;
    }
    let t = TYPES[(sel >> 1) as usize % TYPES.len()];
    let Ok((version, value)) = RecordValue::decode_with_version(t, rest) else {
        return;
    };
    assert_eq!(value.record_type(), t, "value of another record type");
    let mut again = Vec::new();
    value
        .encode_version(version, &mut again)
        .unwrap_or_else(|e| panic!("decoded value does not re-encode at v{version}: {e}"));
    if !flexible(t, version) {
        assert_eq!(again, rest, "v{version} value bytes changed: {value:?}");
    }
    let back = RecordValue::decode_with_version(t, &again)
        .unwrap_or_else(|e| panic!("re-encoded value does not decode: {e}\n{value:?}"));
    assert_eq!(back, (version, value), "value changed across re-encoding");
});
