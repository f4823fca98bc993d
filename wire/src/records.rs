//! Codecs for the records the group coordinator keeps in `__consumer_offsets`.
//!
//! Every change to a group (a committed offset, a classic group's generation, a KIP-848 member's
//! subscription, target or current assignment, ...) is written as one key/value record to the
//! group's `__consumer_offsets` partition, and replaying the partition rebuilds the state. This
//! module turns those keys and values into typed structs and back.
//!
//! **The bytes must match Kafka's exactly.** The schemas are Kafka's
//! `group-coordinator/src/main/resources/common/message/*.json` (`OffsetCommitKey.json`,
//! `OffsetCommitValue.json`, `GroupMetadataValue.json`, `ConsumerGroup*Value.json`, ...) and the
//! framing is `coordinator-common/.../runtime/CoordinatorRecordSerde.java`:
//!
//! * key = `int16 record type` + the key struct at version 0 (keys are never flexible: int16-length
//!   strings, big-endian ints);
//! * value = `int16 version` + the value struct at that version; a tombstone is a null value
//!   (represented here as `None`);
//! * flexible value versions use compact strings/arrays/bytes (unsigned varint length + 1, 0 =
//!   null) and end every struct, nested ones included, with a tagged-field section, as in the RPC
//!   protocol. A nullable struct in a tagged field carries one extra unsigned varint (1 = present)
//!   before the struct, as Kafka's generated code writes it.
//!
//! Byte equality matters in both directions: compaction keys on the exact key bytes (a tombstone
//! only deletes a record whose key bytes are identical), Kafka brokers and
//! `kafka-dump-log.sh --offsets-decoder` must be able to read what we write, and we must load a
//! partition that Kafka wrote.
//!
//! **Write versions** follow what Kafka 4.1+ writes, so a Kafka broker of that age can take over a
//! partition we wrote (and the other way round):
//! * `OffsetCommitValue`: v1 when the commit carries an explicit expiry (the only version with
//!   `expireTimestamp`), else v4 (`GroupCoordinatorRecordHelpers.offsetCommitValueVersion`; 4.0
//!   wrote v3, which 4.1+ still reads). See [`OffsetCommitValue::write_version`].
//! * `GroupMetadataValue`: v3 (`GROUP_METADATA_VALUE_VERSION`); v4 (flexible) is readable but
//!   Kafka does not write it.
//! * KIP-848 values: v0, their only version (flexible).
//! * `LegacyOffsetCommit*` (type 0) is read-only in Kafka: the coordinator never produces it. It is
//!   encodable here only so tests and tools can build such records.
//!
//! Decoding never panics and never allocates from an untrusted count: every length is checked
//! against the bytes that remain. Unknown tagged fields are skipped. Trailing bytes after a key or
//! value are rejected (Kafka ignores them, but Kafka never writes them either, so they mean
//! corruption). Unknown record types yield [`RecordError::UnknownType`], which a loader can choose
//! to skip, as Kafka's does.

use thiserror::Error;
use uuid::Uuid;

pub mod txn;

/// Record types (the int16 prefix of every key), from the `apiKey` of Kafka's coordinator record
/// JSONs (reference §2.2). Share (10-15) and streams (17, 19-23) groups are not implemented.
pub mod record_type {
    pub const LEGACY_OFFSET_COMMIT: i16 = 0;
    pub const OFFSET_COMMIT: i16 = 1;
    pub const GROUP_METADATA: i16 = 2;
    pub const CONSUMER_GROUP_METADATA: i16 = 3;
    pub const CONSUMER_GROUP_PARTITION_METADATA: i16 = 4;
    pub const CONSUMER_GROUP_MEMBER_METADATA: i16 = 5;
    pub const CONSUMER_GROUP_TARGET_ASSIGNMENT_METADATA: i16 = 6;
    pub const CONSUMER_GROUP_TARGET_ASSIGNMENT_MEMBER: i16 = 7;
    pub const CONSUMER_GROUP_CURRENT_MEMBER_ASSIGNMENT: i16 = 8;
    pub const CONSUMER_GROUP_REGULAR_EXPRESSION: i16 = 16;
}

/// Values of [`ConsumerGroupCurrentMemberAssignmentValue::state`]
/// (`group/modern/MemberState.java`).
pub mod member_state {
    pub const STABLE: i8 = 0;
    pub const UNREVOKED_PARTITIONS: i8 = 1;
    pub const UNRELEASED_PARTITIONS: i8 = 2;
    pub const UNKNOWN: i8 = 127;
}

/// Kafka refuses to serialize a string longer than this (generated `addSize`: `> 0x7fff`), in
/// classic and compact form alike, and its readers reject longer compact strings.
const MAX_STRING_BYTES: usize = 0x7fff;

/// Upper bound on what a decoder reserves up front for an array; the rest grows as elements
/// actually decode, so a lying count cannot make us reserve memory the input does not back.
const MAX_PREALLOC: usize = 1024;

/// Why a key or value did not decode or encode. Offsets are byte positions within the key or
/// value buffer (including its int16 prefix).
#[derive(Debug, Error, Clone, PartialEq, Eq)]
pub enum RecordError {
    /// The key's record type is not one this module knows. Kafka's loader logs and skips these.
    #[error("unknown record type {0}")]
    UnknownType(i16),
    #[error("record type {record_type} has no value version {version}")]
    UnsupportedVersion { record_type: i16, version: i16 },
    #[error("truncated: {what} needs {needed} bytes at offset {offset}, {available} left")]
    Truncated {
        what: &'static str,
        offset: usize,
        needed: usize,
        available: usize,
    },
    #[error("invalid {what} at offset {offset}: {reason}")]
    Invalid {
        what: &'static str,
        offset: usize,
        reason: &'static str,
    },
    #[error("{len} trailing bytes after the record at offset {offset}")]
    TrailingBytes { offset: usize, len: usize },
    #[error("{what} is {len} bytes/elements long, more than the format allows ({max})")]
    TooLong {
        what: &'static str,
        len: usize,
        max: usize,
    },
    #[error("key has record type {key} but value has record type {value}")]
    TypeMismatch { key: i16, value: i16 },
}

type Result<T> = std::result::Result<T, RecordError>;

// ---------------------------------------------------------------------------------------------
// Primitive reader / writer
// ---------------------------------------------------------------------------------------------

/// Bounds-checked cursor. `flexible` selects compact (varint) or classic (int16/int32) lengths.
struct Reader<'a> {
    buf: &'a [u8],
    pos: usize,
    flexible: bool,
}

impl<'a> Reader<'a> {
    fn new(buf: &'a [u8], flexible: bool) -> Self {
        Reader {
            buf,
            pos: 0,
            flexible,
        }
    }

    fn remaining(&self) -> usize {
        self.buf.len() - self.pos
    }

    fn take(&mut self, n: usize, what: &'static str) -> Result<&'a [u8]> {
        if n > self.remaining() {
            return Err(RecordError::Truncated {
                what,
                offset: self.pos,
                needed: n,
                available: self.remaining(),
            });
        }
        let s = &self.buf[self.pos..self.pos + n];
        self.pos += n;
        Ok(s)
    }

    fn array<const N: usize>(&mut self, what: &'static str) -> Result<[u8; N]> {
        let mut a = [0u8; N];
        a.copy_from_slice(self.take(N, what)?);
        Ok(a)
    }

    fn i8(&mut self, what: &'static str) -> Result<i8> {
        Ok(i8::from_be_bytes(self.array(what)?))
    }

    fn i16(&mut self, what: &'static str) -> Result<i16> {
        Ok(i16::from_be_bytes(self.array(what)?))
    }

    fn i32(&mut self, what: &'static str) -> Result<i32> {
        Ok(i32::from_be_bytes(self.array(what)?))
    }

    fn i64(&mut self, what: &'static str) -> Result<i64> {
        Ok(i64::from_be_bytes(self.array(what)?))
    }

    fn uuid(&mut self, what: &'static str) -> Result<Uuid> {
        Ok(Uuid::from_bytes(self.array(what)?))
    }

    fn invalid<T>(&self, offset: usize, what: &'static str, reason: &'static str) -> Result<T> {
        Err(RecordError::Invalid {
            what,
            offset,
            reason,
        })
    }

    /// Unsigned base-128 varint, at most 5 bytes, value must fit in u32.
    fn uvarint(&mut self, what: &'static str) -> Result<u32> {
        let start = self.pos;
        let mut value: u64 = 0;
        for i in 0..5 {
            let b = self.take(1, what)?[0];
            value |= u64::from(b & 0x7f) << (7 * i);
            if b & 0x80 == 0 {
                return match u32::try_from(value) {
                    Ok(v) => Ok(v),
                    Err(_) => self.invalid(start, what, "varint exceeds 32 bits"),
                };
            }
        }
        self.invalid(start, what, "varint longer than 5 bytes")
    }

    /// A length prefix: `None` for null. Classic: int16 (strings) or int32 (bytes, arrays) with -1
    /// for null; compact: unsigned varint of length + 1 with 0 for null.
    fn length(&mut self, what: &'static str, classic_i16: bool) -> Result<Option<usize>> {
        let start = self.pos;
        if self.flexible {
            let n = self.uvarint(what)?;
            Ok(n.checked_sub(1).map(|n| n as usize))
        } else {
            let n = if classic_i16 {
                i32::from(self.i16(what)?)
            } else {
                self.i32(what)?
            };
            match n {
                -1 => Ok(None),
                n if n < 0 => self.invalid(start, what, "negative length"),
                n => Ok(Some(n as usize)),
            }
        }
    }

    fn nullable_string(&mut self, what: &'static str) -> Result<Option<String>> {
        let start = self.pos;
        let Some(len) = self.length(what, true)? else {
            return Ok(None);
        };
        if len > MAX_STRING_BYTES {
            return self.invalid(start, what, "string longer than 32767 bytes");
        }
        let bytes = self.take(len, what)?;
        match utf8(bytes) {
            Some(s) => Ok(Some(s.to_owned())),
            None => self.invalid(start, what, "string is not UTF-8"),
        }
    }

    fn string(&mut self, what: &'static str) -> Result<String> {
        let start = self.pos;
        match self.nullable_string(what)? {
            Some(s) => Ok(s),
            None => self.invalid(start, what, "null in a non-nullable string"),
        }
    }

    fn bytes(&mut self, what: &'static str) -> Result<Vec<u8>> {
        let start = self.pos;
        match self.length(what, false)? {
            Some(len) => Ok(self.take(len, what)?.to_vec()),
            None => self.invalid(start, what, "null in non-nullable bytes"),
        }
    }

    /// Element count of a non-nullable array whose elements take at least `min_elem` bytes each;
    /// a count the remaining bytes cannot back is rejected before anything is allocated.
    fn array_len(&mut self, what: &'static str, min_elem: usize) -> Result<usize> {
        let start = self.pos;
        match self.length(what, false)? {
            None => self.invalid(start, what, "null in a non-nullable array"),
            Some(n) if n.saturating_mul(min_elem) > self.remaining() => {
                self.invalid(start, what, "array count exceeds the remaining bytes")
            }
            Some(n) => Ok(n),
        }
    }

    fn vec<T>(
        &mut self,
        what: &'static str,
        min_elem: usize,
        mut elem: impl FnMut(&mut Self) -> Result<T>,
    ) -> Result<Vec<T>> {
        let n = self.array_len(what, min_elem)?;
        let mut v = Vec::with_capacity(n.min(MAX_PREALLOC));
        for _ in 0..n {
            v.push(elem(self)?);
        }
        Ok(v)
    }

    fn i32_vec(&mut self, what: &'static str) -> Result<Vec<i32>> {
        self.vec(what, 4, |r| r.i32(what))
    }

    fn string_vec(&mut self, what: &'static str) -> Result<Vec<String>> {
        self.vec(what, 1, |r| r.string(what))
    }

    /// The tagged-field section that ends every struct of a flexible version. `known` is called
    /// with a reader limited to the field's bytes and returns whether it recognised the tag; a
    /// recognised field must use exactly its declared size. Unknown tags are skipped.
    fn tagged_fields(
        &mut self,
        mut known: impl FnMut(u32, &mut Reader<'a>) -> Result<bool>,
    ) -> Result<()> {
        let count = self.uvarint("tagged field count")?;
        for _ in 0..count {
            let tag = self.uvarint("tag")?;
            let size = self.uvarint("tagged field size")? as usize;
            let start = self.pos;
            self.take(size, "tagged field")?;
            let mut sub = Reader {
                buf: &self.buf[..start + size],
                pos: start,
                flexible: true,
            };
            if known(tag, &mut sub)? && sub.pos != start + size {
                return self.invalid(sub.pos, "tagged field", "field shorter than its size");
            }
        }
        Ok(())
    }

    /// Skips the tagged-field section if this version has one.
    fn end_struct(&mut self) -> Result<()> {
        if self.flexible {
            self.tagged_fields(|_, _| Ok(false))?;
        }
        Ok(())
    }

    fn finish(&self) -> Result<()> {
        if self.remaining() > 0 {
            return Err(RecordError::TrailingBytes {
                offset: self.pos,
                len: self.remaining(),
            });
        }
        Ok(())
    }
}

struct Writer<'a> {
    out: &'a mut Vec<u8>,
    flexible: bool,
}

impl Writer<'_> {
    fn i8(&mut self, v: i8) {
        self.out.extend_from_slice(&v.to_be_bytes());
    }

    fn i16(&mut self, v: i16) {
        self.out.extend_from_slice(&v.to_be_bytes());
    }

    fn i32(&mut self, v: i32) {
        self.out.extend_from_slice(&v.to_be_bytes());
    }

    fn i64(&mut self, v: i64) {
        self.out.extend_from_slice(&v.to_be_bytes());
    }

    fn uuid(&mut self, v: &Uuid) {
        self.out.extend_from_slice(v.as_bytes());
    }

    fn uvarint(&mut self, mut v: u32) {
        while v >= 0x80 {
            self.out.push((v as u8 & 0x7f) | 0x80);
            v >>= 7;
        }
        self.out.push(v as u8);
    }

    /// Length prefix for a present value (see [`Reader::length`]).
    fn length(&mut self, len: usize, classic_i16: bool, what: &'static str) -> Result<()> {
        let max = if classic_i16 {
            MAX_STRING_BYTES
        } else {
            i32::MAX as usize - 1
        };
        if len > max {
            return Err(RecordError::TooLong { what, len, max });
        }
        if self.flexible {
            self.uvarint(len as u32 + 1);
        } else if classic_i16 {
            self.i16(len as i16);
        } else {
            self.i32(len as i32);
        }
        Ok(())
    }

    fn null(&mut self, classic_i16: bool) {
        if self.flexible {
            self.uvarint(0);
        } else if classic_i16 {
            self.i16(-1);
        } else {
            self.i32(-1);
        }
    }

    fn string(&mut self, s: &str, what: &'static str) -> Result<()> {
        self.length(s.len(), true, what)?;
        self.out.extend_from_slice(s.as_bytes());
        Ok(())
    }

    fn nullable_string(&mut self, s: Option<&str>, what: &'static str) -> Result<()> {
        match s {
            Some(s) => self.string(s, what),
            None => {
                self.null(true);
                Ok(())
            }
        }
    }

    fn bytes(&mut self, b: &[u8], what: &'static str) -> Result<()> {
        self.length(b.len(), false, what)?;
        self.out.extend_from_slice(b);
        Ok(())
    }

    fn vec<T>(
        &mut self,
        items: &[T],
        what: &'static str,
        mut elem: impl FnMut(&mut Self, &T) -> Result<()>,
    ) -> Result<()> {
        self.length(items.len(), false, what)?;
        for item in items {
            elem(self, item)?;
        }
        Ok(())
    }

    fn i32_vec(&mut self, items: &[i32], what: &'static str) -> Result<()> {
        self.vec(items, what, |w, v| {
            w.i32(*v);
            Ok(())
        })
    }

    fn string_vec(&mut self, items: &[String], what: &'static str) -> Result<()> {
        self.vec(items, what, |w, s| w.string(s, what))
    }

    /// Writes a tagged-field section (flexible versions only) from `(tag, body)` pairs given in
    /// ascending tag order.
    fn tagged_fields(&mut self, fields: &[(u32, Vec<u8>)]) -> Result<()> {
        if !self.flexible {
            return Ok(());
        }
        self.uvarint(fields.len() as u32);
        for (tag, body) in fields {
            if body.len() > u32::MAX as usize {
                return Err(RecordError::TooLong {
                    what: "tagged field",
                    len: body.len(),
                    max: u32::MAX as usize,
                });
            }
            self.uvarint(*tag);
            self.uvarint(body.len() as u32);
            self.out.extend_from_slice(body);
        }
        Ok(())
    }

    /// Writes an empty tagged-field section if this version has one.
    fn end_struct(&mut self) {
        if self.flexible {
            self.uvarint(0);
        }
    }
}

/// Builds the body of one tagged field (always flexible encoding).
fn tagged_body(f: impl FnOnce(&mut Writer) -> Result<()>) -> Result<Vec<u8>> {
    let mut body = Vec::new();
    f(&mut Writer {
        out: &mut body,
        flexible: true,
    })?;
    Ok(body)
}

// ---------------------------------------------------------------------------------------------
// Keys
// ---------------------------------------------------------------------------------------------

/// A `__consumer_offsets` record key. Field names follow the Kafka JSONs (`group` = `GroupId`).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum RecordKey {
    /// Type 0: written by very old brokers only; Kafka reads it and never writes it.
    LegacyOffsetCommit {
        group: String,
        topic: String,
        partition: i32,
    },
    /// Type 1.
    OffsetCommit {
        group: String,
        topic: String,
        partition: i32,
    },
    /// Type 2: a classic group's metadata.
    GroupMetadata { group: String },
    /// Type 3.
    ConsumerGroupMetadata { group: String },
    /// Type 4: only tombstones are written since KIP-1101 (4.1).
    ConsumerGroupPartitionMetadata { group: String },
    /// Type 5.
    ConsumerGroupMemberMetadata { group: String, member_id: String },
    /// Type 6.
    ConsumerGroupTargetAssignmentMetadata { group: String },
    /// Type 7.
    ConsumerGroupTargetAssignmentMember { group: String, member_id: String },
    /// Type 8.
    ConsumerGroupCurrentMemberAssignment { group: String, member_id: String },
    /// Type 16.
    ConsumerGroupRegularExpression { group: String, regex: String },
}

impl RecordKey {
    /// The int16 record type that prefixes the key bytes.
    pub fn record_type(&self) -> i16 {
        use record_type::*;
        match self {
            RecordKey::LegacyOffsetCommit { .. } => LEGACY_OFFSET_COMMIT,
            RecordKey::OffsetCommit { .. } => OFFSET_COMMIT,
            RecordKey::GroupMetadata { .. } => GROUP_METADATA,
            RecordKey::ConsumerGroupMetadata { .. } => CONSUMER_GROUP_METADATA,
            RecordKey::ConsumerGroupPartitionMetadata { .. } => CONSUMER_GROUP_PARTITION_METADATA,
            RecordKey::ConsumerGroupMemberMetadata { .. } => CONSUMER_GROUP_MEMBER_METADATA,
            RecordKey::ConsumerGroupTargetAssignmentMetadata { .. } => {
                CONSUMER_GROUP_TARGET_ASSIGNMENT_METADATA
            }
            RecordKey::ConsumerGroupTargetAssignmentMember { .. } => {
                CONSUMER_GROUP_TARGET_ASSIGNMENT_MEMBER
            }
            RecordKey::ConsumerGroupCurrentMemberAssignment { .. } => {
                CONSUMER_GROUP_CURRENT_MEMBER_ASSIGNMENT
            }
            RecordKey::ConsumerGroupRegularExpression { .. } => CONSUMER_GROUP_REGULAR_EXPRESSION,
        }
    }

    /// The group the record belongs to.
    pub fn group(&self) -> &str {
        match self {
            RecordKey::LegacyOffsetCommit { group, .. }
            | RecordKey::OffsetCommit { group, .. }
            | RecordKey::GroupMetadata { group }
            | RecordKey::ConsumerGroupMetadata { group }
            | RecordKey::ConsumerGroupPartitionMetadata { group }
            | RecordKey::ConsumerGroupMemberMetadata { group, .. }
            | RecordKey::ConsumerGroupTargetAssignmentMetadata { group }
            | RecordKey::ConsumerGroupTargetAssignmentMember { group, .. }
            | RecordKey::ConsumerGroupCurrentMemberAssignment { group, .. }
            | RecordKey::ConsumerGroupRegularExpression { group, .. } => group,
        }
    }

    /// Appends the key bytes. Fails only if a string is longer than 32767 bytes (Kafka cannot
    /// write that either); `out` is then left as it was.
    pub fn encode(&self, out: &mut Vec<u8>) -> Result<()> {
        let start = out.len();
        let r = self.encode_inner(out);
        if r.is_err() {
            out.truncate(start);
        }
        r
    }

    fn encode_inner(&self, out: &mut Vec<u8>) -> Result<()> {
        let mut w = Writer {
            out,
            flexible: false,
        };
        w.i16(self.record_type());
        match self {
            RecordKey::LegacyOffsetCommit {
                group,
                topic,
                partition,
            }
            | RecordKey::OffsetCommit {
                group,
                topic,
                partition,
            } => {
                w.string(group, "group")?;
                w.string(topic, "topic")?;
                w.i32(*partition);
            }
            RecordKey::GroupMetadata { group }
            | RecordKey::ConsumerGroupMetadata { group }
            | RecordKey::ConsumerGroupPartitionMetadata { group }
            | RecordKey::ConsumerGroupTargetAssignmentMetadata { group } => {
                w.string(group, "GroupId")?;
            }
            RecordKey::ConsumerGroupMemberMetadata { group, member_id }
            | RecordKey::ConsumerGroupTargetAssignmentMember { group, member_id }
            | RecordKey::ConsumerGroupCurrentMemberAssignment { group, member_id } => {
                w.string(group, "GroupId")?;
                w.string(member_id, "MemberId")?;
            }
            RecordKey::ConsumerGroupRegularExpression { group, regex } => {
                w.string(group, "GroupId")?;
                w.string(regex, "RegularExpression")?;
            }
        }
        Ok(())
    }

    /// The key bytes as a new vector.
    pub fn to_bytes(&self) -> Result<Vec<u8>> {
        let mut out = Vec::new();
        self.encode(&mut out)?;
        Ok(out)
    }

    /// The (group, topic, partition) of an OffsetCommit key (record type 1), borrowed from its
    /// bytes; `None` for any other key or a malformed one (which [`RecordKey::decode`] then
    /// reports). Loading a partition takes this path for most of its records, so it must not
    /// allocate.
    pub fn offset_commit_ref(bytes: &[u8]) -> Option<(&str, &str, i32)> {
        let (group, topic, partition) = Self::offset_commit_raw(bytes)?;
        Some((utf8(group)?, utf8(topic)?, partition))
    }

    /// [`RecordKey::offset_commit_ref`] without the UTF-8 check of the two strings: the
    /// structure is checked (record type 1, lengths, no trailing bytes), the strings are raw
    /// bytes. A loader that interns (group, topic) validates a pair once, when it first sees
    /// it, instead of once per record; bytes equal to an interned string are valid by
    /// construction.
    #[inline]
    pub fn offset_commit_raw(bytes: &[u8]) -> Option<(&[u8], &[u8], i32)> {
        // type i16 · group (i16 length, bytes) · topic (i16 length, bytes) · partition i32.
        // A negative length (-1 is null) is refused, as `str_ref` refuses it; an i16 length can
        // never exceed Kafka's 32767-byte string limit.
        if bytes.len() < 10 || bytes[..2] != record_type::OFFSET_COMMIT.to_be_bytes() {
            return None;
        }
        let glen = i16::from_be_bytes([bytes[2], bytes[3]]);
        if glen < 0 {
            return None;
        }
        let tpos = 4 + glen as usize;
        // The rest after the group: topic length (2) + partition (4) at least.
        if bytes.len() < tpos + 6 {
            return None;
        }
        let tlen = i16::from_be_bytes([bytes[tpos], bytes[tpos + 1]]);
        if tlen < 0 || bytes.len() != tpos + 2 + tlen as usize + 4 {
            return None;
        }
        let ppos = tpos + 2 + tlen as usize;
        let partition = i32::from_be_bytes(bytes[ppos..].try_into().ok()?);
        Some((&bytes[4..tpos], &bytes[tpos + 2..ppos], partition))
    }

    /// Decodes a whole key. An unknown record type gives [`RecordError::UnknownType`].
    pub fn decode(bytes: &[u8]) -> Result<RecordKey> {
        use record_type::*;
        let mut r = Reader::new(bytes, false);
        let t = r.i16("record type")?;
        let key = match t {
            LEGACY_OFFSET_COMMIT | OFFSET_COMMIT => {
                let group = r.string("group")?;
                let topic = r.string("topic")?;
                let partition = r.i32("partition")?;
                if t == LEGACY_OFFSET_COMMIT {
                    RecordKey::LegacyOffsetCommit {
                        group,
                        topic,
                        partition,
                    }
                } else {
                    RecordKey::OffsetCommit {
                        group,
                        topic,
                        partition,
                    }
                }
            }
            GROUP_METADATA => RecordKey::GroupMetadata {
                group: r.string("group")?,
            },
            CONSUMER_GROUP_METADATA => RecordKey::ConsumerGroupMetadata {
                group: r.string("GroupId")?,
            },
            CONSUMER_GROUP_PARTITION_METADATA => RecordKey::ConsumerGroupPartitionMetadata {
                group: r.string("GroupId")?,
            },
            CONSUMER_GROUP_TARGET_ASSIGNMENT_METADATA => {
                RecordKey::ConsumerGroupTargetAssignmentMetadata {
                    group: r.string("GroupId")?,
                }
            }
            CONSUMER_GROUP_MEMBER_METADATA
            | CONSUMER_GROUP_TARGET_ASSIGNMENT_MEMBER
            | CONSUMER_GROUP_CURRENT_MEMBER_ASSIGNMENT => {
                let group = r.string("GroupId")?;
                let member_id = r.string("MemberId")?;
                match t {
                    CONSUMER_GROUP_MEMBER_METADATA => {
                        RecordKey::ConsumerGroupMemberMetadata { group, member_id }
                    }
                    CONSUMER_GROUP_TARGET_ASSIGNMENT_MEMBER => {
                        RecordKey::ConsumerGroupTargetAssignmentMember { group, member_id }
                    }
                    _ => RecordKey::ConsumerGroupCurrentMemberAssignment { group, member_id },
                }
            }
            CONSUMER_GROUP_REGULAR_EXPRESSION => RecordKey::ConsumerGroupRegularExpression {
                group: r.string("GroupId")?,
                regex: r.string("RegularExpression")?,
            },
            other => return Err(RecordError::UnknownType(other)),
        };
        r.finish()?;
        Ok(key)
    }
}

// ---------------------------------------------------------------------------------------------
// Values
// ---------------------------------------------------------------------------------------------

/// Implemented by every value struct: its schema's version range and field codec.
trait ValueCodec: Sized {
    const RECORD_TYPE: i16;
    const MIN_VERSION: i16;
    const MAX_VERSION: i16;
    /// First flexible version (`i16::MAX` if none).
    const FIRST_FLEXIBLE: i16;

    fn write_version(&self) -> i16;
    fn write(&self, w: &mut Writer, version: i16) -> Result<()>;
    fn read(r: &mut Reader, version: i16) -> Result<Self>;

    fn check_version(version: i16) -> Result<()> {
        if (Self::MIN_VERSION..=Self::MAX_VERSION).contains(&version) {
            Ok(())
        } else {
            Err(RecordError::UnsupportedVersion {
                record_type: Self::RECORD_TYPE,
                version,
            })
        }
    }

    fn encode_at(&self, version: i16, out: &mut Vec<u8>) -> Result<()> {
        Self::check_version(version)?;
        let start = out.len();
        let mut w = Writer {
            out,
            flexible: version >= Self::FIRST_FLEXIBLE,
        };
        w.i16(version);
        let r = self.write(&mut w, version);
        if r.is_err() {
            out.truncate(start);
        }
        r
    }

    /// `bytes` is the whole value including its version prefix (already read into `version`).
    fn decode_at(version: i16, bytes: &[u8]) -> Result<Self> {
        Self::check_version(version)?;
        let mut r = Reader {
            buf: bytes,
            pos: 2,
            flexible: version >= Self::FIRST_FLEXIBLE,
        };
        let v = Self::read(&mut r, version)?;
        r.finish()?;
        Ok(v)
    }
}

/// Type 0 value, v0 only, never flexible. Read-only in Kafka.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct LegacyOffsetCommitValue {
    pub offset: i64,
    pub metadata: String,
    pub commit_timestamp: i64,
}

impl ValueCodec for LegacyOffsetCommitValue {
    const RECORD_TYPE: i16 = record_type::LEGACY_OFFSET_COMMIT;
    const MIN_VERSION: i16 = 0;
    const MAX_VERSION: i16 = 0;
    const FIRST_FLEXIBLE: i16 = i16::MAX;

    fn write_version(&self) -> i16 {
        0
    }

    fn write(&self, w: &mut Writer, _version: i16) -> Result<()> {
        w.i64(self.offset);
        w.string(&self.metadata, "metadata")?;
        w.i64(self.commit_timestamp);
        Ok(())
    }

    fn read(r: &mut Reader, _version: i16) -> Result<Self> {
        Ok(LegacyOffsetCommitValue {
            offset: r.i64("offset")?,
            metadata: r.string("metadata")?,
            commit_timestamp: r.i64("commitTimestamp")?,
        })
    }
}

/// Type 1 value: a committed offset. Versions 0-4, flexible from 4.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OffsetCommitValue {
    pub offset: i64,
    /// v3+; -1 when unknown (and when read from v0-2).
    pub leader_epoch: i32,
    /// Never null: Kafka stores a null `CommittedMetadata` as "".
    pub metadata: String,
    /// Broker wall clock at commit time.
    pub commit_timestamp: i64,
    /// v1 only; -1 = no explicit expiry. When set, the record is written at v1 (which has no
    /// leader epoch or topic id, so those are not stored).
    pub expire_timestamp: i64,
    /// v4+ tagged field 0; nil (all zero) = absent, and then not written.
    pub topic_id: Uuid,
}

impl Default for OffsetCommitValue {
    fn default() -> Self {
        OffsetCommitValue {
            offset: 0,
            leader_epoch: -1,
            metadata: String::new(),
            commit_timestamp: 0,
            expire_timestamp: -1,
            topic_id: Uuid::nil(),
        }
    }
}

impl OffsetCommitValue {
    /// The version Kafka 4.1+ writes: 1 if an explicit expiry is set (the only version that
    /// carries it), else 4 (`GroupCoordinatorRecordHelpers.offsetCommitValueVersion`).
    pub fn write_version(&self) -> i16 {
        if self.expire_timestamp != -1 {
            1
        } else {
            4
        }
    }
}

impl ValueCodec for OffsetCommitValue {
    const RECORD_TYPE: i16 = record_type::OFFSET_COMMIT;
    const MIN_VERSION: i16 = 0;
    const MAX_VERSION: i16 = 4;
    const FIRST_FLEXIBLE: i16 = 4;

    fn write_version(&self) -> i16 {
        OffsetCommitValue::write_version(self)
    }

    fn write(&self, w: &mut Writer, version: i16) -> Result<()> {
        w.i64(self.offset);
        if version >= 3 {
            w.i32(self.leader_epoch);
        }
        w.string(&self.metadata, "metadata")?;
        w.i64(self.commit_timestamp);
        if version == 1 {
            w.i64(self.expire_timestamp);
        }
        if version >= 4 {
            let mut tags = Vec::new();
            if !self.topic_id.is_nil() {
                tags.push((0, self.topic_id.as_bytes().to_vec()));
            }
            w.tagged_fields(&tags)?;
        }
        Ok(())
    }

    fn read(r: &mut Reader, version: i16) -> Result<Self> {
        let mut v = OffsetCommitValue {
            offset: r.i64("offset")?,
            ..Default::default()
        };
        if version >= 3 {
            v.leader_epoch = r.i32("leaderEpoch")?;
        }
        v.metadata = r.string("metadata")?;
        v.commit_timestamp = r.i64("commitTimestamp")?;
        if version == 1 {
            v.expire_timestamp = r.i64("expireTimestamp")?;
        }
        if r.flexible {
            let topic_id = &mut v.topic_id;
            r.tagged_fields(|tag, sub| match tag {
                0 => {
                    *topic_id = sub.uuid("topicId")?;
                    Ok(true)
                }
                _ => Ok(false),
            })?;
        }
        Ok(v)
    }
}

/// An [`OffsetCommitValue`] whose metadata is borrowed from the record's bytes: what the
/// replay fast path decodes, without building a [`RecordValue`] or allocating.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OffsetCommitValueRef<'a> {
    pub offset: i64,
    pub leader_epoch: i32,
    pub metadata: &'a str,
    pub commit_timestamp: i64,
    pub expire_timestamp: i64,
    pub topic_id: Uuid,
}

impl OffsetCommitValueRef<'_> {
    pub fn to_owned_value(&self) -> OffsetCommitValue {
        OffsetCommitValue {
            offset: self.offset,
            leader_epoch: self.leader_epoch,
            metadata: self.metadata.to_string(),
            commit_timestamp: self.commit_timestamp,
            expire_timestamp: self.expire_timestamp,
            topic_id: self.topic_id,
        }
    }
}

/// Big-endian fixed-width reads for [`OffsetCommitValue::decode_ref`]: `None` past the end.
#[inline(always)]
fn be<const N: usize>(b: &[u8], pos: &mut usize) -> Option<[u8; N]> {
    let a: [u8; N] = b.get(*pos..*pos + N)?.try_into().ok()?;
    *pos += N;
    Some(a)
}

/// `Reader::uvarint` for [`OffsetCommitValue::decode_ref`]: at most 5 bytes, fits in u32.
#[inline(always)]
fn uvarint_at(b: &[u8], pos: &mut usize) -> Option<u32> {
    let first = *b.get(*pos)?;
    *pos += 1;
    if first < 0x80 {
        return Some(u32::from(first));
    }
    let mut value = u64::from(first & 0x7f);
    for i in 1..5 {
        let x = *b.get(*pos)?;
        *pos += 1;
        value |= u64::from(x & 0x7f) << (7 * i);
        if x & 0x80 == 0 {
            return u32::try_from(value).ok();
        }
    }
    None
}

impl OffsetCommitValue {
    /// The OffsetCommit value decoder of the replay fast path: the same versions (0-4) and the
    /// same checks as [`RecordValue::decode`] (`ValueCodec::read` above), specialised to this
    /// one type, with the metadata borrowed. `Some(v)` exactly when `RecordValue::decode(1,
    /// bytes)` gives `Ok(OffsetCommit(w))`, and then `w == v.to_owned_value()` (a property test
    /// holds the two to that); `None` means the generic decoder reports an error.
    #[inline]
    pub fn decode_ref(b: &[u8]) -> Option<OffsetCommitValueRef<'_>> {
        // What Kafka 4.1+ and Ringleader write for a commit without an explicit expiry: v4,
        // metadata under 127 bytes, then no tagged field or just the topic id. One length
        // check covers the fixed fields; anything else takes the general path below.
        if b.len() >= 24 && b[..2] == [0, 4] && b[14] != 0 && b[14] < 0x80 {
            let n = b[14] as usize - 1;
            let rest = &b[15..];
            if rest.len() >= n + 9 {
                let metadata = if n == 0 { Some("") } else { utf8(&rest[..n]) };
                let topic_id = match &rest[n + 8..] {
                    [0] => Some(Uuid::nil()),
                    [1, 0, 16, id @ ..] if id.len() == 16 => {
                        Some(Uuid::from_bytes(id.try_into().expect("16 bytes")))
                    }
                    _ => None,
                };
                if let (Some(metadata), Some(topic_id)) = (metadata, topic_id) {
                    let be8 = |s: &[u8]| i64::from_be_bytes(s[..8].try_into().expect("8 bytes"));
                    return Some(OffsetCommitValueRef {
                        offset: be8(&b[2..]),
                        leader_epoch: i32::from_be_bytes(b[10..14].try_into().expect("4 bytes")),
                        metadata,
                        commit_timestamp: be8(&rest[n..]),
                        expire_timestamp: -1,
                        topic_id,
                    });
                }
            }
        }
        Self::decode_ref_general(b)
    }

    fn decode_ref_general(b: &[u8]) -> Option<OffsetCommitValueRef<'_>> {
        let mut pos = 0usize;
        let version = i16::from_be_bytes(be(b, &mut pos)?);
        if !(0..=4).contains(&version) {
            return None;
        }
        let offset = i64::from_be_bytes(be(b, &mut pos)?);
        let leader_epoch = if version >= 3 {
            i32::from_be_bytes(be(b, &mut pos)?)
        } else {
            -1
        };
        // metadata: a non-null string, classic (int16 length) before v4, compact from v4.
        let len = if version >= 4 {
            let n = uvarint_at(b, &mut pos)?.checked_sub(1)? as usize;
            if n > MAX_STRING_BYTES {
                return None;
            }
            n
        } else {
            let n = i16::from_be_bytes(be(b, &mut pos)?);
            if n < 0 {
                return None;
            }
            n as usize
        };
        let metadata = if len == 0 {
            ""
        } else {
            utf8(b.get(pos..pos + len)?)?
        };
        pos += len;
        let commit_timestamp = i64::from_be_bytes(be(b, &mut pos)?);
        let expire_timestamp = if version == 1 {
            i64::from_be_bytes(be(b, &mut pos)?)
        } else {
            -1
        };
        let mut topic_id = Uuid::nil();
        if version >= 4 {
            // Tagged fields: tag 0 is the topic id (exactly 16 bytes); others are skipped.
            let count = uvarint_at(b, &mut pos)?;
            for _ in 0..count {
                let tag = uvarint_at(b, &mut pos)?;
                let size = uvarint_at(b, &mut pos)? as usize;
                let field = b.get(pos..pos.checked_add(size)?)?;
                pos += size;
                if tag == 0 {
                    topic_id = Uuid::from_bytes(field.try_into().ok()?);
                }
            }
        }
        if pos != b.len() {
            return None;
        }
        Some(OffsetCommitValueRef {
            offset,
            leader_epoch,
            metadata,
            commit_timestamp,
            expire_timestamp,
            topic_id,
        })
    }
}

/// `bytes` as a `str` if it is UTF-8. Group ids, topics and member ids are nearly always
/// ASCII, which a word-at-a-time check settles in a fraction of what the general validator
/// takes on short strings (it was an eighth of replay's instructions).
#[inline]
pub fn utf8(bytes: &[u8]) -> Option<&str> {
    if bytes.is_ascii() {
        // SAFETY: ASCII bytes are valid UTF-8.
        Some(unsafe { std::str::from_utf8_unchecked(bytes) })
    } else {
        std::str::from_utf8(bytes).ok()
    }
}

/// Type 2 value: a classic group. Versions 0-4, flexible from 4; written at v3.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GroupMetadataValue {
    /// "" for an empty group.
    pub protocol_type: String,
    pub generation: i32,
    pub protocol: Option<String>,
    pub leader: Option<String>,
    /// v2+; -1 when read from v0-1.
    pub current_state_timestamp: i64,
    pub members: Vec<GroupMetadataMember>,
}

impl Default for GroupMetadataValue {
    fn default() -> Self {
        GroupMetadataValue {
            protocol_type: String::new(),
            generation: 0,
            protocol: None,
            leader: None,
            current_state_timestamp: -1,
            members: Vec::new(),
        }
    }
}

/// One member of a [`GroupMetadataValue`] (`MemberMetadata` common struct).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GroupMetadataMember {
    pub member_id: String,
    /// v3+ (static membership); None for dynamic members and when read from v0-2.
    pub group_instance_id: Option<String>,
    pub client_id: String,
    pub client_host: String,
    /// v1+; -1 when read from v0 (old brokers then used the session timeout instead).
    pub rebalance_timeout: i32,
    pub session_timeout: i32,
    /// The member's metadata for the selected protocol.
    pub subscription: Vec<u8>,
    /// The member's assignment from SyncGroup.
    pub assignment: Vec<u8>,
}

impl Default for GroupMetadataMember {
    fn default() -> Self {
        GroupMetadataMember {
            member_id: String::new(),
            group_instance_id: None,
            client_id: String::new(),
            client_host: String::new(),
            rebalance_timeout: -1,
            session_timeout: 0,
            subscription: Vec::new(),
            assignment: Vec::new(),
        }
    }
}

impl GroupMetadataMember {
    fn write(&self, w: &mut Writer, version: i16) -> Result<()> {
        w.string(&self.member_id, "memberId")?;
        if version >= 3 {
            w.nullable_string(self.group_instance_id.as_deref(), "groupInstanceId")?;
        }
        w.string(&self.client_id, "clientId")?;
        w.string(&self.client_host, "clientHost")?;
        if version >= 1 {
            w.i32(self.rebalance_timeout);
        }
        w.i32(self.session_timeout);
        w.bytes(&self.subscription, "subscription")?;
        w.bytes(&self.assignment, "assignment")?;
        w.end_struct();
        Ok(())
    }

    fn read(r: &mut Reader, version: i16) -> Result<Self> {
        let member_id = r.string("memberId")?;
        let group_instance_id = if version >= 3 {
            r.nullable_string("groupInstanceId")?
        } else {
            None
        };
        let client_id = r.string("clientId")?;
        let client_host = r.string("clientHost")?;
        let rebalance_timeout = if version >= 1 {
            r.i32("rebalanceTimeout")?
        } else {
            -1
        };
        let m = GroupMetadataMember {
            member_id,
            group_instance_id,
            client_id,
            client_host,
            rebalance_timeout,
            session_timeout: r.i32("sessionTimeout")?,
            subscription: r.bytes("subscription")?,
            assignment: r.bytes("assignment")?,
        };
        r.end_struct()?;
        Ok(m)
    }
}

impl ValueCodec for GroupMetadataValue {
    const RECORD_TYPE: i16 = record_type::GROUP_METADATA;
    const MIN_VERSION: i16 = 0;
    const MAX_VERSION: i16 = 4;
    const FIRST_FLEXIBLE: i16 = 4;

    fn write_version(&self) -> i16 {
        3
    }

    fn write(&self, w: &mut Writer, version: i16) -> Result<()> {
        w.string(&self.protocol_type, "protocolType")?;
        w.i32(self.generation);
        w.nullable_string(self.protocol.as_deref(), "protocol")?;
        w.nullable_string(self.leader.as_deref(), "leader")?;
        if version >= 2 {
            w.i64(self.current_state_timestamp);
        }
        w.vec(&self.members, "members", |w, m| m.write(w, version))?;
        w.end_struct();
        Ok(())
    }

    fn read(r: &mut Reader, version: i16) -> Result<Self> {
        let protocol_type = r.string("protocolType")?;
        let generation = r.i32("generation")?;
        let protocol = r.nullable_string("protocol")?;
        let leader = r.nullable_string("leader")?;
        let current_state_timestamp = if version >= 2 {
            r.i64("currentStateTimestamp")?
        } else {
            -1
        };
        let members = r.vec("members", 1, |r| GroupMetadataMember::read(r, version))?;
        r.end_struct()?;
        Ok(GroupMetadataValue {
            protocol_type,
            generation,
            protocol,
            leader,
            current_state_timestamp,
            members,
        })
    }
}

/// Type 3 value: a consumer (KIP-848) group's epoch. v0, flexible.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ConsumerGroupMetadataValue {
    /// The group epoch.
    pub epoch: i32,
    /// Tagged field 0 (4.1+, KIP-1101); 0 = absent, and then not written.
    pub metadata_hash: i64,
}

impl ValueCodec for ConsumerGroupMetadataValue {
    const RECORD_TYPE: i16 = record_type::CONSUMER_GROUP_METADATA;
    const MIN_VERSION: i16 = 0;
    const MAX_VERSION: i16 = 0;
    const FIRST_FLEXIBLE: i16 = 0;

    fn write_version(&self) -> i16 {
        0
    }

    fn write(&self, w: &mut Writer, _version: i16) -> Result<()> {
        w.i32(self.epoch);
        let mut tags = Vec::new();
        if self.metadata_hash != 0 {
            tags.push((0, self.metadata_hash.to_be_bytes().to_vec()));
        }
        w.tagged_fields(&tags)
    }

    fn read(r: &mut Reader, _version: i16) -> Result<Self> {
        let mut v = ConsumerGroupMetadataValue {
            epoch: r.i32("Epoch")?,
            metadata_hash: 0,
        };
        let hash = &mut v.metadata_hash;
        r.tagged_fields(|tag, sub| match tag {
            0 => {
                *hash = sub.i64("MetadataHash")?;
                Ok(true)
            }
            _ => Ok(false),
        })?;
        Ok(v)
    }
}

/// Type 4 value: the subscribed topics' metadata (replaced by the metadata hash in 4.1; Kafka now
/// only writes tombstones for it). v0, flexible.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ConsumerGroupPartitionMetadataValue {
    pub topics: Vec<TopicMetadata>,
}

/// One topic of a [`ConsumerGroupPartitionMetadataValue`].
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct TopicMetadata {
    pub topic_id: Uuid,
    pub topic_name: String,
    pub num_partitions: i32,
    /// Deprecated after 4.0; empty when no rack information is known.
    pub partition_metadata: Vec<PartitionMetadata>,
}

/// The racks of one partition in a [`TopicMetadata`].
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct PartitionMetadata {
    pub partition: i32,
    pub racks: Vec<String>,
}

impl ValueCodec for ConsumerGroupPartitionMetadataValue {
    const RECORD_TYPE: i16 = record_type::CONSUMER_GROUP_PARTITION_METADATA;
    const MIN_VERSION: i16 = 0;
    const MAX_VERSION: i16 = 0;
    const FIRST_FLEXIBLE: i16 = 0;

    fn write_version(&self) -> i16 {
        0
    }

    fn write(&self, w: &mut Writer, _version: i16) -> Result<()> {
        w.vec(&self.topics, "Topics", |w, t| {
            w.uuid(&t.topic_id);
            w.string(&t.topic_name, "TopicName")?;
            w.i32(t.num_partitions);
            w.vec(&t.partition_metadata, "PartitionMetadata", |w, p| {
                w.i32(p.partition);
                w.string_vec(&p.racks, "Racks")?;
                w.end_struct();
                Ok(())
            })?;
            w.end_struct();
            Ok(())
        })?;
        w.end_struct();
        Ok(())
    }

    fn read(r: &mut Reader, _version: i16) -> Result<Self> {
        let topics = r.vec("Topics", 16, |r| {
            let topic_id = r.uuid("TopicId")?;
            let topic_name = r.string("TopicName")?;
            let num_partitions = r.i32("NumPartitions")?;
            let partition_metadata = r.vec("PartitionMetadata", 4, |r| {
                let p = PartitionMetadata {
                    partition: r.i32("Partition")?,
                    racks: r.string_vec("Racks")?,
                };
                r.end_struct()?;
                Ok(p)
            })?;
            r.end_struct()?;
            Ok(TopicMetadata {
                topic_id,
                topic_name,
                num_partitions,
                partition_metadata,
            })
        })?;
        r.end_struct()?;
        Ok(ConsumerGroupPartitionMetadataValue { topics })
    }
}

/// Type 5 value: a consumer group member's subscription and client details. v0, flexible.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConsumerGroupMemberMetadataValue {
    pub instance_id: Option<String>,
    pub rack_id: Option<String>,
    pub client_id: String,
    pub client_host: String,
    pub subscribed_topic_names: Vec<String>,
    pub subscribed_topic_regex: Option<String>,
    pub rebalance_timeout_ms: i32,
    pub server_assignor: Option<String>,
    /// Tagged field 0; set only for classic-protocol members living in a consumer group.
    pub classic_member_metadata: Option<ClassicMemberMetadata>,
}

impl Default for ConsumerGroupMemberMetadataValue {
    fn default() -> Self {
        ConsumerGroupMemberMetadataValue {
            instance_id: None,
            rack_id: None,
            client_id: String::new(),
            client_host: String::new(),
            subscribed_topic_names: Vec::new(),
            subscribed_topic_regex: None,
            rebalance_timeout_ms: -1,
            server_assignor: None,
            classic_member_metadata: None,
        }
    }
}

/// The classic-protocol details of a [`ConsumerGroupMemberMetadataValue`].
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ClassicMemberMetadata {
    pub session_timeout_ms: i32,
    pub supported_protocols: Vec<ClassicProtocol>,
}

/// One JoinGroup protocol of a [`ClassicMemberMetadata`].
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ClassicProtocol {
    pub name: String,
    pub metadata: Vec<u8>,
}

impl ClassicMemberMetadata {
    fn write(&self, w: &mut Writer) -> Result<()> {
        w.i32(self.session_timeout_ms);
        w.vec(&self.supported_protocols, "SupportedProtocols", |w, p| {
            w.string(&p.name, "Name")?;
            w.bytes(&p.metadata, "Metadata")?;
            w.end_struct();
            Ok(())
        })?;
        w.end_struct();
        Ok(())
    }

    fn read(r: &mut Reader) -> Result<Self> {
        let session_timeout_ms = r.i32("SessionTimeoutMs")?;
        let supported_protocols = r.vec("SupportedProtocols", 3, |r| {
            let p = ClassicProtocol {
                name: r.string("Name")?,
                metadata: r.bytes("Metadata")?,
            };
            r.end_struct()?;
            Ok(p)
        })?;
        r.end_struct()?;
        Ok(ClassicMemberMetadata {
            session_timeout_ms,
            supported_protocols,
        })
    }
}

impl ValueCodec for ConsumerGroupMemberMetadataValue {
    const RECORD_TYPE: i16 = record_type::CONSUMER_GROUP_MEMBER_METADATA;
    const MIN_VERSION: i16 = 0;
    const MAX_VERSION: i16 = 0;
    const FIRST_FLEXIBLE: i16 = 0;

    fn write_version(&self) -> i16 {
        0
    }

    fn write(&self, w: &mut Writer, _version: i16) -> Result<()> {
        w.nullable_string(self.instance_id.as_deref(), "InstanceId")?;
        w.nullable_string(self.rack_id.as_deref(), "RackId")?;
        w.string(&self.client_id, "ClientId")?;
        w.string(&self.client_host, "ClientHost")?;
        w.string_vec(&self.subscribed_topic_names, "SubscribedTopicNames")?;
        w.nullable_string(
            self.subscribed_topic_regex.as_deref(),
            "SubscribedTopicRegex",
        )?;
        w.i32(self.rebalance_timeout_ms);
        w.nullable_string(self.server_assignor.as_deref(), "ServerAssignor")?;
        // A nullable struct in a tagged field: presence varint, then the struct. The field's
        // default is an empty struct, not null, so Kafka writes a null one explicitly (tag 0,
        // size 1, presence 0): the generated `ConsumerGroupMemberMetadataValue.write` only skips
        // a value equal to `new ClassicMemberMetadata()`.
        let body = match &self.classic_member_metadata {
            Some(classic) => tagged_body(|w| {
                w.uvarint(1);
                classic.write(w)
            })?,
            None => vec![0],
        };
        w.tagged_fields(&[(0, body)])
    }

    fn read(r: &mut Reader, _version: i16) -> Result<Self> {
        let mut v = ConsumerGroupMemberMetadataValue {
            instance_id: r.nullable_string("InstanceId")?,
            rack_id: r.nullable_string("RackId")?,
            client_id: r.string("ClientId")?,
            client_host: r.string("ClientHost")?,
            subscribed_topic_names: r.string_vec("SubscribedTopicNames")?,
            subscribed_topic_regex: r.nullable_string("SubscribedTopicRegex")?,
            rebalance_timeout_ms: r.i32("RebalanceTimeoutMs")?,
            server_assignor: r.nullable_string("ServerAssignor")?,
            classic_member_metadata: None,
        };
        let classic = &mut v.classic_member_metadata;
        r.tagged_fields(|tag, sub| match tag {
            0 => {
                *classic = if sub.uvarint("ClassicMemberMetadata presence")? == 0 {
                    None
                } else {
                    Some(ClassicMemberMetadata::read(sub)?)
                };
                Ok(true)
            }
            _ => Ok(false),
        })?;
        Ok(v)
    }
}

/// Type 6 value: the epoch of a consumer group's target assignment. v0, flexible.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ConsumerGroupTargetAssignmentMetadataValue {
    pub assignment_epoch: i32,
    /// Tagged field 0 (4.3+); 0 = absent, and then not written.
    pub assignment_timestamp: i64,
}

impl ValueCodec for ConsumerGroupTargetAssignmentMetadataValue {
    const RECORD_TYPE: i16 = record_type::CONSUMER_GROUP_TARGET_ASSIGNMENT_METADATA;
    const MIN_VERSION: i16 = 0;
    const MAX_VERSION: i16 = 0;
    const FIRST_FLEXIBLE: i16 = 0;

    fn write_version(&self) -> i16 {
        0
    }

    fn write(&self, w: &mut Writer, _version: i16) -> Result<()> {
        w.i32(self.assignment_epoch);
        let mut tags = Vec::new();
        if self.assignment_timestamp != 0 {
            tags.push((0, self.assignment_timestamp.to_be_bytes().to_vec()));
        }
        w.tagged_fields(&tags)
    }

    fn read(r: &mut Reader, _version: i16) -> Result<Self> {
        let mut v = ConsumerGroupTargetAssignmentMetadataValue {
            assignment_epoch: r.i32("AssignmentEpoch")?,
            assignment_timestamp: 0,
        };
        let ts = &mut v.assignment_timestamp;
        r.tagged_fields(|tag, sub| match tag {
            0 => {
                *ts = sub.i64("AssignmentTimestamp")?;
                Ok(true)
            }
            _ => Ok(false),
        })?;
        Ok(v)
    }
}

/// Type 7 value: one member's target assignment. v0, flexible.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ConsumerGroupTargetAssignmentMemberValue {
    pub topic_partitions: Vec<TargetTopicPartitions>,
}

/// One topic of a [`ConsumerGroupTargetAssignmentMemberValue`].
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct TargetTopicPartitions {
    pub topic_id: Uuid,
    pub partitions: Vec<i32>,
}

impl ValueCodec for ConsumerGroupTargetAssignmentMemberValue {
    const RECORD_TYPE: i16 = record_type::CONSUMER_GROUP_TARGET_ASSIGNMENT_MEMBER;
    const MIN_VERSION: i16 = 0;
    const MAX_VERSION: i16 = 0;
    const FIRST_FLEXIBLE: i16 = 0;

    fn write_version(&self) -> i16 {
        0
    }

    fn write(&self, w: &mut Writer, _version: i16) -> Result<()> {
        w.vec(&self.topic_partitions, "TopicPartitions", |w, tp| {
            w.uuid(&tp.topic_id);
            w.i32_vec(&tp.partitions, "Partitions")?;
            w.end_struct();
            Ok(())
        })?;
        w.end_struct();
        Ok(())
    }

    fn read(r: &mut Reader, _version: i16) -> Result<Self> {
        let topic_partitions = r.vec("TopicPartitions", 16, |r| {
            let tp = TargetTopicPartitions {
                topic_id: r.uuid("TopicId")?,
                partitions: r.i32_vec("Partitions")?,
            };
            r.end_struct()?;
            Ok(tp)
        })?;
        r.end_struct()?;
        Ok(ConsumerGroupTargetAssignmentMemberValue { topic_partitions })
    }
}

/// Type 8 value: a member's current (reconciled) assignment. v0, flexible.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ConsumerGroupCurrentMemberAssignmentValue {
    pub member_epoch: i32,
    pub previous_member_epoch: i32,
    /// See [`member_state`].
    pub state: i8,
    pub assigned_partitions: Vec<CurrentTopicPartitions>,
    pub partitions_pending_revocation: Vec<CurrentTopicPartitions>,
}

/// One topic of a [`ConsumerGroupCurrentMemberAssignmentValue`] (`TopicPartitions` common struct).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct CurrentTopicPartitions {
    pub topic_id: Uuid,
    pub partitions: Vec<i32>,
    /// Tagged field 0 (4.3+, KIP-1251): the assignment epoch of each partition, same length as
    /// `partitions`. Written only when `Some`.
    pub assignment_epochs: Option<Vec<i32>>,
}

impl CurrentTopicPartitions {
    fn write(&self, w: &mut Writer) -> Result<()> {
        w.uuid(&self.topic_id);
        w.i32_vec(&self.partitions, "Partitions")?;
        let mut tags = Vec::new();
        if let Some(epochs) = &self.assignment_epochs {
            tags.push((0, tagged_body(|w| w.i32_vec(epochs, "AssignmentEpochs"))?));
        }
        w.tagged_fields(&tags)
    }

    fn read(r: &mut Reader) -> Result<Self> {
        let mut tp = CurrentTopicPartitions {
            topic_id: r.uuid("TopicId")?,
            partitions: r.i32_vec("Partitions")?,
            assignment_epochs: None,
        };
        let epochs = &mut tp.assignment_epochs;
        r.tagged_fields(|tag, sub| match tag {
            0 => {
                let start = sub.pos;
                *epochs = match sub.length("AssignmentEpochs", false)? {
                    None => None,
                    Some(_) => {
                        sub.pos = start;
                        Some(sub.i32_vec("AssignmentEpochs")?)
                    }
                };
                Ok(true)
            }
            _ => Ok(false),
        })?;
        Ok(tp)
    }
}

impl ValueCodec for ConsumerGroupCurrentMemberAssignmentValue {
    const RECORD_TYPE: i16 = record_type::CONSUMER_GROUP_CURRENT_MEMBER_ASSIGNMENT;
    const MIN_VERSION: i16 = 0;
    const MAX_VERSION: i16 = 0;
    const FIRST_FLEXIBLE: i16 = 0;

    fn write_version(&self) -> i16 {
        0
    }

    fn write(&self, w: &mut Writer, _version: i16) -> Result<()> {
        w.i32(self.member_epoch);
        w.i32(self.previous_member_epoch);
        w.i8(self.state);
        w.vec(&self.assigned_partitions, "AssignedPartitions", |w, tp| {
            tp.write(w)
        })?;
        w.vec(
            &self.partitions_pending_revocation,
            "PartitionsPendingRevocation",
            |w, tp| tp.write(w),
        )?;
        w.end_struct();
        Ok(())
    }

    fn read(r: &mut Reader, _version: i16) -> Result<Self> {
        let v = ConsumerGroupCurrentMemberAssignmentValue {
            member_epoch: r.i32("MemberEpoch")?,
            previous_member_epoch: r.i32("PreviousMemberEpoch")?,
            state: r.i8("State")?,
            assigned_partitions: r.vec("AssignedPartitions", 18, CurrentTopicPartitions::read)?,
            partitions_pending_revocation: r.vec(
                "PartitionsPendingRevocation",
                18,
                CurrentTopicPartitions::read,
            )?,
        };
        r.end_struct()?;
        Ok(v)
    }
}

/// Type 16 value: the topics a subscribed regular expression resolved to. v0, flexible.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ConsumerGroupRegularExpressionValue {
    pub topics: Vec<String>,
    /// The metadata image version the regex was resolved against.
    pub version: i64,
    pub timestamp: i64,
}

impl ValueCodec for ConsumerGroupRegularExpressionValue {
    const RECORD_TYPE: i16 = record_type::CONSUMER_GROUP_REGULAR_EXPRESSION;
    const MIN_VERSION: i16 = 0;
    const MAX_VERSION: i16 = 0;
    const FIRST_FLEXIBLE: i16 = 0;

    fn write_version(&self) -> i16 {
        0
    }

    fn write(&self, w: &mut Writer, _version: i16) -> Result<()> {
        w.string_vec(&self.topics, "Topics")?;
        w.i64(self.version);
        w.i64(self.timestamp);
        w.end_struct();
        Ok(())
    }

    fn read(r: &mut Reader, _version: i16) -> Result<Self> {
        let v = ConsumerGroupRegularExpressionValue {
            topics: r.string_vec("Topics")?,
            version: r.i64("Version")?,
            timestamp: r.i64("Timestamp")?,
        };
        r.end_struct()?;
        Ok(v)
    }
}

/// A `__consumer_offsets` record value (tombstones are `None` at the [`Record`] level).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RecordValue {
    LegacyOffsetCommit(LegacyOffsetCommitValue),
    OffsetCommit(OffsetCommitValue),
    GroupMetadata(GroupMetadataValue),
    ConsumerGroupMetadata(ConsumerGroupMetadataValue),
    ConsumerGroupPartitionMetadata(ConsumerGroupPartitionMetadataValue),
    ConsumerGroupMemberMetadata(ConsumerGroupMemberMetadataValue),
    ConsumerGroupTargetAssignmentMetadata(ConsumerGroupTargetAssignmentMetadataValue),
    ConsumerGroupTargetAssignmentMember(ConsumerGroupTargetAssignmentMemberValue),
    ConsumerGroupCurrentMemberAssignment(ConsumerGroupCurrentMemberAssignmentValue),
    ConsumerGroupRegularExpression(ConsumerGroupRegularExpressionValue),
}

/// Calls `$body` with `$v` bound to the inner value of any [`RecordValue`] variant.
macro_rules! with_value {
    ($self:expr, $v:ident => $body:expr) => {
        match $self {
            RecordValue::LegacyOffsetCommit($v) => $body,
            RecordValue::OffsetCommit($v) => $body,
            RecordValue::GroupMetadata($v) => $body,
            RecordValue::ConsumerGroupMetadata($v) => $body,
            RecordValue::ConsumerGroupPartitionMetadata($v) => $body,
            RecordValue::ConsumerGroupMemberMetadata($v) => $body,
            RecordValue::ConsumerGroupTargetAssignmentMetadata($v) => $body,
            RecordValue::ConsumerGroupTargetAssignmentMember($v) => $body,
            RecordValue::ConsumerGroupCurrentMemberAssignment($v) => $body,
            RecordValue::ConsumerGroupRegularExpression($v) => $body,
        }
    };
}

fn decode_as<T: ValueCodec>(
    version: i16,
    bytes: &[u8],
    wrap: impl FnOnce(T) -> RecordValue,
) -> Result<RecordValue> {
    T::decode_at(version, bytes).map(wrap)
}

impl RecordValue {
    /// The record type of the key this value belongs under.
    pub fn record_type(&self) -> i16 {
        fn t<T: ValueCodec>(_: &T) -> i16 {
            T::RECORD_TYPE
        }
        with_value!(self, v => t(v))
    }

    /// The version [`RecordValue::encode`] writes: what Kafka 4.1+ writes for this value.
    pub fn write_version(&self) -> i16 {
        with_value!(self, v => ValueCodec::write_version(v))
    }

    /// Appends the value bytes (version prefix + struct) at [`RecordValue::write_version`].
    /// Fails only on a string over 32767 bytes or a collection over `i32::MAX` elements; `out`
    /// is then left as it was.
    pub fn encode(&self, out: &mut Vec<u8>) -> Result<()> {
        with_value!(self, v => v.encode_at(ValueCodec::write_version(v), out))
    }

    /// Appends the value bytes at an explicit version (for tests and tools). Fields the version
    /// lacks are dropped, as Kafka does for its "ignorable" fields.
    pub fn encode_version(&self, version: i16, out: &mut Vec<u8>) -> Result<()> {
        with_value!(self, v => v.encode_at(version, out))
    }

    /// The value bytes at the write version, as a new vector.
    pub fn to_bytes(&self) -> Result<Vec<u8>> {
        let mut out = Vec::new();
        self.encode(&mut out)?;
        Ok(out)
    }

    /// Decodes a whole (non-null) value of a record whose key has `record_type`.
    pub fn decode(record_type: i16, bytes: &[u8]) -> Result<RecordValue> {
        Self::decode_with_version(record_type, bytes).map(|(_, v)| v)
    }

    /// Like [`RecordValue::decode`], also returning the version the value was written at.
    pub fn decode_with_version(record_type: i16, bytes: &[u8]) -> Result<(i16, RecordValue)> {
        use record_type::*;
        let version = Reader::new(bytes, false).i16("value version")?;
        let value = match record_type {
            LEGACY_OFFSET_COMMIT => decode_as(version, bytes, RecordValue::LegacyOffsetCommit),
            OFFSET_COMMIT => decode_as(version, bytes, RecordValue::OffsetCommit),
            GROUP_METADATA => decode_as(version, bytes, RecordValue::GroupMetadata),
            CONSUMER_GROUP_METADATA => {
                decode_as(version, bytes, RecordValue::ConsumerGroupMetadata)
            }
            CONSUMER_GROUP_PARTITION_METADATA => {
                decode_as(version, bytes, RecordValue::ConsumerGroupPartitionMetadata)
            }
            CONSUMER_GROUP_MEMBER_METADATA => {
                decode_as(version, bytes, RecordValue::ConsumerGroupMemberMetadata)
            }
            CONSUMER_GROUP_TARGET_ASSIGNMENT_METADATA => decode_as(
                version,
                bytes,
                RecordValue::ConsumerGroupTargetAssignmentMetadata,
            ),
            CONSUMER_GROUP_TARGET_ASSIGNMENT_MEMBER => decode_as(
                version,
                bytes,
                RecordValue::ConsumerGroupTargetAssignmentMember,
            ),
            CONSUMER_GROUP_CURRENT_MEMBER_ASSIGNMENT => decode_as(
                version,
                bytes,
                RecordValue::ConsumerGroupCurrentMemberAssignment,
            ),
            CONSUMER_GROUP_REGULAR_EXPRESSION => {
                decode_as(version, bytes, RecordValue::ConsumerGroupRegularExpression)
            }
            other => Err(RecordError::UnknownType(other)),
        }?;
        Ok((version, value))
    }
}

// ---------------------------------------------------------------------------------------------
// Records
// ---------------------------------------------------------------------------------------------

/// One record as the coordinator produces and replays it: key + value (`None` = tombstone).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Record {
    pub key: RecordKey,
    pub value: Option<RecordValue>,
}

impl Record {
    pub fn new(key: RecordKey, value: RecordValue) -> Self {
        Record {
            key,
            value: Some(value),
        }
    }

    /// A deletion marker for `key` (null value; compaction drops the key).
    pub fn tombstone(key: RecordKey) -> Self {
        Record { key, value: None }
    }

    pub fn encode_key(&self) -> Result<Vec<u8>> {
        self.key.to_bytes()
    }

    /// `None` for a tombstone. Fails with [`RecordError::TypeMismatch`] if the value does not
    /// belong under the key's record type.
    pub fn encode_value(&self) -> Result<Option<Vec<u8>>> {
        let Some(value) = &self.value else {
            return Ok(None);
        };
        if value.record_type() != self.key.record_type() {
            return Err(RecordError::TypeMismatch {
                key: self.key.record_type(),
                value: value.record_type(),
            });
        }
        value.to_bytes().map(Some)
    }

    /// Decodes a key and its (possibly null) value. An unknown record type in the key gives
    /// [`RecordError::UnknownType`], which a loader may skip.
    pub fn decode(key: &[u8], value: Option<&[u8]>) -> Result<Record> {
        let key = RecordKey::decode(key)?;
        let value = match value {
            Some(bytes) => Some(RecordValue::decode(key.record_type(), bytes)?),
            None => None,
        };
        Ok(Record { key, value })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    // Byte builders for the expected encodings: each writes one primitive of the schema.
    fn i16b(v: i16) -> Vec<u8> {
        v.to_be_bytes().to_vec()
    }
    fn i32b(v: i32) -> Vec<u8> {
        v.to_be_bytes().to_vec()
    }
    fn i64b(v: i64) -> Vec<u8> {
        v.to_be_bytes().to_vec()
    }
    /// Classic string: int16 length + UTF-8.
    fn s16(s: &str) -> Vec<u8> {
        let mut v = (s.len() as i16).to_be_bytes().to_vec();
        v.extend_from_slice(s.as_bytes());
        v
    }
    /// Compact string with a length below 127: one varint byte (len + 1) + UTF-8.
    fn cs(s: &str) -> Vec<u8> {
        assert!(s.len() < 127);
        let mut v = vec![s.len() as u8 + 1];
        v.extend_from_slice(s.as_bytes());
        v
    }
    fn cat(parts: &[&[u8]]) -> Vec<u8> {
        parts.concat()
    }

    const U1: [u8; 16] = [
        0x3d, 0x5a, 0x01, 0x9b, 0x44, 0x21, 0x4f, 0x0e, 0x8a, 0x11, 0x22, 0x33, 0x44, 0x55, 0x66,
        0x77,
    ];

    fn enc_value(v: &RecordValue) -> Vec<u8> {
        v.to_bytes().unwrap()
    }

    fn check_value(v: RecordValue, expected: &[u8]) {
        assert_eq!(enc_value(&v), expected, "encode of {v:?}");
        assert_eq!(
            RecordValue::decode(v.record_type(), expected).unwrap(),
            v,
            "decode"
        );
    }

    #[test]
    fn offset_commit_key_bytes() {
        let key = RecordKey::OffsetCommit {
            group: "g".into(),
            topic: "orders".into(),
            partition: 3,
        };
        let expected = cat(&[&[0x00, 0x01], &s16("g"), &s16("orders"), &[0, 0, 0, 3]]);
        assert_eq!(key.to_bytes().unwrap(), expected);
        assert_eq!(RecordKey::decode(&expected).unwrap(), key);
        assert_eq!(key.group(), "g");
        assert_eq!(key.record_type(), 1);
    }

    #[test]
    fn group_metadata_key_bytes() {
        let key = RecordKey::GroupMetadata {
            group: "g-classic".into(),
        };
        let expected = cat(&[&[0x00, 0x02, 0x00, 0x09], b"g-classic"]);
        assert_eq!(key.to_bytes().unwrap(), expected);
        assert_eq!(RecordKey::decode(&expected).unwrap(), key);
    }

    #[test]
    fn legacy_offset_commit_key_and_value_decode() {
        let key = cat(&[&i16b(0), &s16("g"), &s16("t"), &i32b(7)]);
        let value = cat(&[&i16b(0), &i64b(5), &s16("md"), &i64b(99)]);
        let rec = Record::decode(&key, Some(&value)).unwrap();
        assert_eq!(
            rec,
            Record::new(
                RecordKey::LegacyOffsetCommit {
                    group: "g".into(),
                    topic: "t".into(),
                    partition: 7
                },
                RecordValue::LegacyOffsetCommit(LegacyOffsetCommitValue {
                    offset: 5,
                    metadata: "md".into(),
                    commit_timestamp: 99
                })
            )
        );
    }

    #[test]
    fn offset_commit_value_v1_bytes() {
        let v = OffsetCommitValue {
            offset: 100,
            leader_epoch: -1,
            metadata: "m".into(),
            commit_timestamp: 1_000,
            expire_timestamp: 2_000,
            topic_id: Uuid::nil(),
        };
        assert_eq!(v.write_version(), 1);
        let expected = cat(&[
            &[0x00, 0x01],
            &i64b(100),
            &[0x00, 0x01, b'm'],
            &i64b(1_000),
            &i64b(2_000),
        ]);
        check_value(RecordValue::OffsetCommit(v), &expected);
    }

    #[test]
    fn offset_commit_value_v3_bytes() {
        let v = OffsetCommitValue {
            offset: 100,
            leader_epoch: 5,
            metadata: String::new(),
            commit_timestamp: 1_000,
            ..Default::default()
        };
        let expected = cat(&[
            &[0x00, 0x03],
            &i64b(100),
            &[0, 0, 0, 5],
            &[0x00, 0x00],
            &i64b(1_000),
        ]);
        let rv = RecordValue::OffsetCommit(v);
        let mut out = Vec::new();
        rv.encode_version(3, &mut out).unwrap();
        assert_eq!(out, expected);
        assert_eq!(
            RecordValue::decode_with_version(1, &expected).unwrap(),
            (3, rv)
        );
    }

    #[test]
    fn offset_commit_value_v4_bytes() {
        let mut v = OffsetCommitValue {
            offset: 42,
            leader_epoch: -1,
            metadata: "meta".into(),
            commit_timestamp: 7,
            ..Default::default()
        };
        assert_eq!(v.write_version(), 4);
        let no_tag = cat(&[
            &[0x00, 0x04],
            &i64b(42),
            &[0xff, 0xff, 0xff, 0xff],
            &[0x05, b'm', b'e', b't', b'a'],
            &i64b(7),
            &[0x00], // no tagged fields
        ]);
        check_value(RecordValue::OffsetCommit(v.clone()), &no_tag);

        v.topic_id = Uuid::from_bytes(U1);
        let with_tag = cat(&[
            &[0x00, 0x04],
            &i64b(42),
            &[0xff, 0xff, 0xff, 0xff],
            &[0x05, b'm', b'e', b't', b'a'],
            &i64b(7),
            &[0x01, 0x00, 0x10], // one tagged field: tag 0, 16 bytes
            &U1,
        ]);
        check_value(RecordValue::OffsetCommit(v), &with_tag);
    }

    #[test]
    fn unknown_tagged_fields_are_skipped() {
        let bytes = cat(&[
            &[0x00, 0x04],
            &i64b(42),
            &i32b(3),
            &[0x01],
            &i64b(7),
            &[0x02, 0x00, 0x10],
            &U1,
            &[0x05, 0x03, 0xaa, 0xbb, 0xcc], // tag 5, 3 bytes we do not know
        ]);
        let v = RecordValue::decode(1, &bytes).unwrap();
        assert_eq!(
            v,
            RecordValue::OffsetCommit(OffsetCommitValue {
                offset: 42,
                leader_epoch: 3,
                metadata: String::new(),
                commit_timestamp: 7,
                expire_timestamp: -1,
                topic_id: Uuid::from_bytes(U1),
            })
        );
    }

    #[test]
    fn group_metadata_value_v3_bytes() {
        let v = GroupMetadataValue {
            protocol_type: "consumer".into(),
            generation: 2,
            protocol: Some("range".into()),
            leader: Some("m1".into()),
            current_state_timestamp: 1234,
            members: vec![
                GroupMetadataMember {
                    member_id: "m1".into(),
                    group_instance_id: Some("i1".into()),
                    client_id: "c".into(),
                    client_host: "/h".into(),
                    rebalance_timeout: 300_000,
                    session_timeout: 45_000,
                    subscription: vec![1, 2],
                    assignment: vec![3],
                },
                GroupMetadataMember {
                    member_id: "m2".into(),
                    group_instance_id: None,
                    client_id: "c".into(),
                    client_host: "/h".into(),
                    rebalance_timeout: 300_000,
                    session_timeout: 45_000,
                    subscription: vec![],
                    assignment: vec![],
                },
            ],
        };
        let expected = cat(&[
            &[0x00, 0x03],
            &s16("consumer"),
            &i32b(2),
            &s16("range"),
            &s16("m1"),
            &i64b(1234),
            &i32b(2), // members
            // static member
            &s16("m1"),
            &s16("i1"),
            &s16("c"),
            &s16("/h"),
            &i32b(300_000),
            &i32b(45_000),
            &[0, 0, 0, 2, 1, 2],
            &[0, 0, 0, 1, 3],
            // dynamic member
            &s16("m2"),
            &[0xff, 0xff],
            &s16("c"),
            &s16("/h"),
            &i32b(300_000),
            &i32b(45_000),
            &[0, 0, 0, 0],
            &[0, 0, 0, 0],
        ]);
        check_value(RecordValue::GroupMetadata(v), &expected);
    }

    #[test]
    fn group_metadata_value_v0_decode() {
        let bytes = cat(&[
            &[0x00, 0x00],
            &s16("consumer"),
            &i32b(1),
            &[0xff, 0xff], // protocol null
            &[0xff, 0xff], // leader null
            &i32b(1),
            &s16("m"),
            &s16("cid"),
            &s16("/1.2.3.4"),
            &i32b(10_000),
            &[0, 0, 0, 1, 9],
            &[0, 0, 0, 0],
        ]);
        let v = RecordValue::decode(2, &bytes).unwrap();
        assert_eq!(
            v,
            RecordValue::GroupMetadata(GroupMetadataValue {
                protocol_type: "consumer".into(),
                generation: 1,
                protocol: None,
                leader: None,
                current_state_timestamp: -1,
                members: vec![GroupMetadataMember {
                    member_id: "m".into(),
                    group_instance_id: None,
                    client_id: "cid".into(),
                    client_host: "/1.2.3.4".into(),
                    rebalance_timeout: -1,
                    session_timeout: 10_000,
                    subscription: vec![9],
                    assignment: vec![],
                }],
            })
        );
        // Re-encoding writes v3, which Kafka reads back to the same fields.
        assert_eq!(enc_value(&v)[..2], [0, 3]);
        assert_eq!(RecordValue::decode(2, &enc_value(&v)).unwrap(), v);
    }

    #[test]
    fn group_metadata_value_v4_flexible_bytes() {
        let v = GroupMetadataValue {
            protocol_type: "consumer".into(),
            generation: 0,
            protocol: None,
            leader: None,
            current_state_timestamp: 5,
            members: vec![GroupMetadataMember {
                member_id: "m".into(),
                group_instance_id: None,
                client_id: "c".into(),
                client_host: "h".into(),
                rebalance_timeout: 1,
                session_timeout: 2,
                subscription: vec![7],
                assignment: vec![],
            }],
        };
        let expected = cat(&[
            &[0x00, 0x04],
            &cs("consumer"),
            &i32b(0),
            &[0x00, 0x00], // null protocol, null leader
            &i64b(5),
            &[0x02], // one member
            &cs("m"),
            &[0x00],
            &cs("c"),
            &cs("h"),
            &i32b(1),
            &i32b(2),
            &[0x02, 7],
            &[0x01],
            &[0x00], // member tags
            &[0x00], // value tags
        ]);
        let rv = RecordValue::GroupMetadata(v);
        let mut out = Vec::new();
        rv.encode_version(4, &mut out).unwrap();
        assert_eq!(out, expected);
        assert_eq!(RecordValue::decode(2, &expected).unwrap(), rv);
    }

    #[test]
    fn current_member_assignment_with_assignment_epochs_bytes() {
        let v = ConsumerGroupCurrentMemberAssignmentValue {
            member_epoch: 3,
            previous_member_epoch: 2,
            state: member_state::UNREVOKED_PARTITIONS,
            assigned_partitions: vec![CurrentTopicPartitions {
                topic_id: Uuid::from_bytes(U1),
                partitions: vec![0, 1, 2],
                assignment_epochs: Some(vec![3, 3, 2]),
            }],
            partitions_pending_revocation: vec![CurrentTopicPartitions {
                topic_id: Uuid::from_bytes(U1),
                partitions: vec![3],
                assignment_epochs: None,
            }],
        };
        let expected = cat(&[
            &[0x00, 0x00],
            &i32b(3),
            &i32b(2),
            &[0x01],
            &[0x02], // AssignedPartitions: 1 entry
            &U1,
            &[0x04],
            &i32b(0),
            &i32b(1),
            &i32b(2),
            &[0x01, 0x00, 0x0d, 0x04], // 1 tag: tag 0, 13 bytes, 3 elements
            &i32b(3),
            &i32b(3),
            &i32b(2),
            &[0x02], // PartitionsPendingRevocation: 1 entry
            &U1,
            &[0x02],
            &i32b(3),
            &[0x00], // no tags
            &[0x00], // value tags
        ]);
        check_value(
            RecordValue::ConsumerGroupCurrentMemberAssignment(v),
            &expected,
        );
    }

    #[test]
    fn member_metadata_with_classic_member_metadata_bytes() {
        let v = ConsumerGroupMemberMetadataValue {
            instance_id: None,
            rack_id: Some("r".into()),
            client_id: "c".into(),
            client_host: "/h".into(),
            subscribed_topic_names: vec!["t".into()],
            subscribed_topic_regex: None,
            rebalance_timeout_ms: 5000,
            server_assignor: None,
            classic_member_metadata: Some(ClassicMemberMetadata {
                session_timeout_ms: 45_000,
                supported_protocols: vec![ClassicProtocol {
                    name: "range".into(),
                    metadata: vec![1, 2],
                }],
            }),
        };
        let expected = cat(&[
            &[0x00, 0x00],
            &[0x00],  // InstanceId null
            &cs("r"), // RackId
            &cs("c"),
            &cs("/h"),
            &[0x02],
            &cs("t"),
            &[0x00], // SubscribedTopicRegex null
            &i32b(5000),
            &[0x00], // ServerAssignor null
            // 1 tagged field: tag 0, size 17 = presence byte + 16-byte struct
            &[0x01, 0x00, 0x11, 0x01],
            &i32b(45_000),
            &[0x02],
            &cs("range"),
            &[0x03, 1, 2],
            &[0x00], // ClassicProtocol tags
            &[0x00], // ClassicMemberMetadata tags
        ]);
        check_value(
            RecordValue::ConsumerGroupMemberMetadata(v.clone()),
            &expected,
        );

        // Without the classic metadata, the tagged field still goes out, holding null: its
        // default is an empty struct, so Kafka 4.4 writes a null one (seen in the bytes of the
        // reference broker's records: valueSize 74 where the field left out gives 71).
        let plain = ConsumerGroupMemberMetadataValue {
            classic_member_metadata: None,
            ..v
        };
        let bytes = enc_value(&RecordValue::ConsumerGroupMemberMetadata(plain.clone()));
        let untagged = expected.len() - 20; // count, tag, size, presence + 16-byte struct
        assert_eq!(
            bytes,
            cat(&[&expected[..untagged], &[0x01, 0x00, 0x01, 0x00]])
        );
        check_value(RecordValue::ConsumerGroupMemberMetadata(plain), &bytes);
    }

    #[test]
    fn kip848_small_values_bytes() {
        check_value(
            RecordValue::ConsumerGroupMetadata(ConsumerGroupMetadataValue {
                epoch: 3,
                metadata_hash: 0,
            }),
            &cat(&[&[0, 0], &i32b(3), &[0x00]]),
        );
        check_value(
            RecordValue::ConsumerGroupMetadata(ConsumerGroupMetadataValue {
                epoch: 3,
                metadata_hash: -2,
            }),
            &cat(&[&[0, 0], &i32b(3), &[0x01, 0x00, 0x08], &i64b(-2)]),
        );
        check_value(
            RecordValue::ConsumerGroupTargetAssignmentMetadata(
                ConsumerGroupTargetAssignmentMetadataValue {
                    assignment_epoch: 4,
                    assignment_timestamp: 77,
                },
            ),
            &cat(&[&[0, 0], &i32b(4), &[0x01, 0x00, 0x08], &i64b(77)]),
        );
        check_value(
            RecordValue::ConsumerGroupTargetAssignmentMember(
                ConsumerGroupTargetAssignmentMemberValue {
                    topic_partitions: vec![TargetTopicPartitions {
                        topic_id: Uuid::from_bytes(U1),
                        partitions: vec![3, 4],
                    }],
                },
            ),
            &cat(&[
                &[0, 0, 0x02],
                &U1,
                &[0x03],
                &i32b(3),
                &i32b(4),
                &[0x00, 0x00],
            ]),
        );
        check_value(
            RecordValue::ConsumerGroupRegularExpression(ConsumerGroupRegularExpressionValue {
                topics: vec!["a".into(), "b".into()],
                version: 9,
                timestamp: 10,
            }),
            &cat(&[
                &[0, 0, 0x03],
                &cs("a"),
                &cs("b"),
                &i64b(9),
                &i64b(10),
                &[0x00],
            ]),
        );
        check_value(
            RecordValue::ConsumerGroupPartitionMetadata(ConsumerGroupPartitionMetadataValue {
                topics: vec![TopicMetadata {
                    topic_id: Uuid::from_bytes(U1),
                    topic_name: "orders".into(),
                    num_partitions: 6,
                    partition_metadata: vec![PartitionMetadata {
                        partition: 0,
                        racks: vec!["r1".into()],
                    }],
                }],
            }),
            &cat(&[
                &[0, 0, 0x02],
                &U1,
                &cs("orders"),
                &i32b(6),
                &[0x02],
                &i32b(0),
                &[0x02],
                &cs("r1"),
                &[0x00, 0x00, 0x00],
            ]),
        );
    }

    #[test]
    fn unknown_type_and_version() {
        let key = cat(&[&i16b(9), &s16("g")]);
        assert_eq!(RecordKey::decode(&key), Err(RecordError::UnknownType(9)));
        assert_eq!(
            Record::decode(&cat(&[&i16b(17), &s16("g")]), None),
            Err(RecordError::UnknownType(17))
        );
        assert_eq!(
            RecordValue::decode(42, &[0, 0]),
            Err(RecordError::UnknownType(42))
        );
        assert_eq!(
            RecordValue::decode(1, &cat(&[&i16b(5), &i64b(1)])),
            Err(RecordError::UnsupportedVersion {
                record_type: 1,
                version: 5
            })
        );
        assert_eq!(
            RecordValue::decode(3, &cat(&[&i16b(1), &i32b(1), &[0]])),
            Err(RecordError::UnsupportedVersion {
                record_type: 3,
                version: 1
            })
        );
    }

    #[test]
    fn tombstones_and_type_mismatch() {
        let key = RecordKey::ConsumerGroupMemberMetadata {
            group: "g".into(),
            member_id: "m".into(),
        };
        let rec = Record::tombstone(key.clone());
        assert_eq!(rec.encode_value().unwrap(), None);
        let key_bytes = rec.encode_key().unwrap();
        assert_eq!(key_bytes, cat(&[&i16b(5), &s16("g"), &s16("m")]));
        assert_eq!(Record::decode(&key_bytes, None).unwrap(), rec);

        let bad = Record::new(
            key,
            RecordValue::ConsumerGroupMetadata(ConsumerGroupMetadataValue::default()),
        );
        assert_eq!(
            bad.encode_value(),
            Err(RecordError::TypeMismatch { key: 5, value: 3 })
        );
    }

    #[test]
    fn too_long_strings_fail_and_leave_output_untouched() {
        let key = RecordKey::GroupMetadata {
            group: "x".repeat(0x8000),
        };
        let mut out = vec![1, 2, 3];
        assert!(matches!(
            key.encode(&mut out),
            Err(RecordError::TooLong { .. })
        ));
        assert_eq!(out, [1, 2, 3]);
        let ok = RecordKey::GroupMetadata {
            group: "x".repeat(0x7fff),
        };
        let bytes = ok.to_bytes().unwrap();
        assert_eq!(RecordKey::decode(&bytes).unwrap(), ok);

        let value = RecordValue::OffsetCommit(OffsetCommitValue {
            metadata: "y".repeat(0x8000),
            ..Default::default()
        });
        let mut out = Vec::new();
        assert!(value.encode(&mut out).is_err());
        assert!(out.is_empty());
    }

    #[test]
    fn malformed_inputs_are_errors() {
        // Trailing byte after a key and after a value.
        let key = cat(&[&i16b(2), &s16("g"), &[0]]);
        assert!(matches!(
            RecordKey::decode(&key),
            Err(RecordError::TrailingBytes { offset: 5, len: 1 })
        ));
        let value = cat(&[&i16b(0), &i32b(1), &[0, 0]]);
        assert!(matches!(
            RecordValue::decode(3, &value),
            Err(RecordError::TrailingBytes { .. })
        ));
        // Null in a non-nullable string.
        let key = cat(&[&i16b(2), &i16b(-1)]);
        assert!(matches!(
            RecordKey::decode(&key),
            Err(RecordError::Invalid { .. })
        ));
        // Invalid UTF-8.
        let key = cat(&[&i16b(2), &i16b(1), &[0xff]]);
        assert!(matches!(
            RecordKey::decode(&key),
            Err(RecordError::Invalid { .. })
        ));
        // An array count far beyond the bytes present.
        let value = cat(&[&i16b(0), &[0xff, 0xff, 0xff, 0xff, 0x0f]]);
        assert!(matches!(
            RecordValue::decode(7, &value),
            Err(RecordError::Invalid { .. })
        ));
        // A classic array count of i32::MAX.
        let value = cat(&[
            &i16b(3),
            &s16(""),
            &i32b(0),
            &i16b(-1),
            &i16b(-1),
            &i64b(0),
            &i32b(i32::MAX),
        ]);
        assert!(matches!(
            RecordValue::decode(2, &value),
            Err(RecordError::Invalid { .. })
        ));
        // Over-long varint.
        let value = cat(&[&i16b(0), &i32b(1), &[0x80, 0x80, 0x80, 0x80, 0x80, 0x01]]);
        assert!(matches!(
            RecordValue::decode(3, &value),
            Err(RecordError::Invalid { .. })
        ));
        // A known tagged field whose declared size is larger than its content.
        let value = cat(&[&i16b(0), &i32b(1), &[0x01, 0x00, 0x09], &i64b(1), &[0]]);
        assert!(matches!(
            RecordValue::decode(3, &value),
            Err(RecordError::Invalid { .. })
        ));
        // ... or smaller.
        let value = cat(&[&i16b(0), &i32b(1), &[0x01, 0x00, 0x04], &i64b(1)]);
        assert!(matches!(
            RecordValue::decode(3, &value),
            Err(RecordError::Truncated { .. })
        ));
        // Empty inputs.
        assert!(RecordKey::decode(&[]).is_err());
        assert!(RecordValue::decode(1, &[]).is_err());
        assert!(RecordValue::decode(1, &[0]).is_err());
    }

    // ------------------------------------------------------------------ property tests

    fn arb_str() -> impl Strategy<Value = String> {
        prop_oneof![3 => "[a-z0-9._-]{0,12}", 1 => "\\PC{0,6}"]
    }
    fn arb_opt_str() -> impl Strategy<Value = Option<String>> {
        proptest::option::of(arb_str())
    }
    fn arb_bytes() -> impl Strategy<Value = Vec<u8>> {
        proptest::collection::vec(any::<u8>(), 0..12)
    }
    fn arb_uuid() -> impl Strategy<Value = Uuid> {
        prop_oneof![
            Just(Uuid::nil()),
            any::<[u8; 16]>().prop_map(Uuid::from_bytes)
        ]
    }
    fn arb_i32s() -> impl Strategy<Value = Vec<i32>> {
        proptest::collection::vec(any::<i32>(), 0..6)
    }
    fn arb_strs() -> impl Strategy<Value = Vec<String>> {
        proptest::collection::vec(arb_str(), 0..4)
    }

    fn arb_key() -> impl Strategy<Value = RecordKey> {
        prop_oneof![
            (arb_str(), arb_str(), any::<i32>()).prop_map(|(group, topic, partition)| {
                RecordKey::LegacyOffsetCommit {
                    group,
                    topic,
                    partition,
                }
            }),
            (arb_str(), arb_str(), any::<i32>()).prop_map(|(group, topic, partition)| {
                RecordKey::OffsetCommit {
                    group,
                    topic,
                    partition,
                }
            }),
            arb_str().prop_map(|group| RecordKey::GroupMetadata { group }),
            arb_str().prop_map(|group| RecordKey::ConsumerGroupMetadata { group }),
            arb_str().prop_map(|group| RecordKey::ConsumerGroupPartitionMetadata { group }),
            (arb_str(), arb_str()).prop_map(|(group, member_id)| {
                RecordKey::ConsumerGroupMemberMetadata { group, member_id }
            }),
            arb_str().prop_map(|group| RecordKey::ConsumerGroupTargetAssignmentMetadata { group }),
            (arb_str(), arb_str()).prop_map(|(group, member_id)| {
                RecordKey::ConsumerGroupTargetAssignmentMember { group, member_id }
            }),
            (arb_str(), arb_str()).prop_map(|(group, member_id)| {
                RecordKey::ConsumerGroupCurrentMemberAssignment { group, member_id }
            }),
            (arb_str(), arb_str()).prop_map(|(group, regex)| {
                RecordKey::ConsumerGroupRegularExpression { group, regex }
            }),
        ]
    }

    fn arb_offset_commit() -> impl Strategy<Value = OffsetCommitValue> {
        (
            any::<i64>(),
            any::<i32>(),
            arb_str(),
            any::<i64>(),
            prop_oneof![Just(-1i64), any::<i64>()],
            arb_uuid(),
        )
            .prop_map(|(offset, leader_epoch, metadata, ts, expire, topic_id)| {
                let mut v = OffsetCommitValue {
                    offset,
                    leader_epoch,
                    metadata,
                    commit_timestamp: ts,
                    expire_timestamp: expire,
                    topic_id,
                };
                if expire != -1 {
                    // v1 carries neither; Kafka drops them too.
                    v.leader_epoch = -1;
                    v.topic_id = Uuid::nil();
                }
                v
            })
    }

    fn arb_group_member() -> impl Strategy<Value = GroupMetadataMember> {
        (
            arb_str(),
            arb_opt_str(),
            arb_str(),
            arb_str(),
            any::<i32>(),
            any::<i32>(),
            arb_bytes(),
            arb_bytes(),
        )
            .prop_map(|(m, i, c, h, rt, st, sub, asg)| GroupMetadataMember {
                member_id: m,
                group_instance_id: i,
                client_id: c,
                client_host: h,
                rebalance_timeout: rt,
                session_timeout: st,
                subscription: sub,
                assignment: asg,
            })
    }

    fn arb_current_tp() -> impl Strategy<Value = CurrentTopicPartitions> {
        (arb_uuid(), arb_i32s(), proptest::option::of(arb_i32s())).prop_map(|(t, p, e)| {
            CurrentTopicPartitions {
                topic_id: t,
                partitions: p,
                assignment_epochs: e,
            }
        })
    }

    fn arb_value() -> impl Strategy<Value = RecordValue> {
        prop_oneof![
            (any::<i64>(), arb_str(), any::<i64>()).prop_map(|(o, m, t)| {
                RecordValue::LegacyOffsetCommit(LegacyOffsetCommitValue {
                    offset: o,
                    metadata: m,
                    commit_timestamp: t,
                })
            }),
            arb_offset_commit().prop_map(RecordValue::OffsetCommit),
            (
                arb_str(),
                any::<i32>(),
                arb_opt_str(),
                arb_opt_str(),
                any::<i64>(),
                proptest::collection::vec(arb_group_member(), 0..3)
            )
                .prop_map(|(pt, g, p, l, ts, members)| {
                    RecordValue::GroupMetadata(GroupMetadataValue {
                        protocol_type: pt,
                        generation: g,
                        protocol: p,
                        leader: l,
                        current_state_timestamp: ts,
                        members,
                    })
                }),
            (any::<i32>(), any::<i64>()).prop_map(|(epoch, metadata_hash)| {
                RecordValue::ConsumerGroupMetadata(ConsumerGroupMetadataValue {
                    epoch,
                    metadata_hash,
                })
            }),
            proptest::collection::vec(
                (
                    arb_uuid(),
                    arb_str(),
                    any::<i32>(),
                    proptest::collection::vec((any::<i32>(), arb_strs()), 0..3)
                ),
                0..3
            )
            .prop_map(|topics| {
                RecordValue::ConsumerGroupPartitionMetadata(ConsumerGroupPartitionMetadataValue {
                    topics: topics
                        .into_iter()
                        .map(|(id, name, n, parts)| TopicMetadata {
                            topic_id: id,
                            topic_name: name,
                            num_partitions: n,
                            partition_metadata: parts
                                .into_iter()
                                .map(|(partition, racks)| PartitionMetadata { partition, racks })
                                .collect(),
                        })
                        .collect(),
                })
            }),
            (
                (arb_opt_str(), arb_opt_str(), arb_str(), arb_str()),
                (arb_strs(), arb_opt_str(), any::<i32>(), arb_opt_str()),
                proptest::option::of((
                    any::<i32>(),
                    proptest::collection::vec((arb_str(), arb_bytes()), 0..3)
                )),
            )
                .prop_map(|((i, r, c, h), (names, re, rt, sa), classic)| {
                    RecordValue::ConsumerGroupMemberMetadata(ConsumerGroupMemberMetadataValue {
                        instance_id: i,
                        rack_id: r,
                        client_id: c,
                        client_host: h,
                        subscribed_topic_names: names,
                        subscribed_topic_regex: re,
                        rebalance_timeout_ms: rt,
                        server_assignor: sa,
                        classic_member_metadata: classic.map(|(st, protos)| {
                            ClassicMemberMetadata {
                                session_timeout_ms: st,
                                supported_protocols: protos
                                    .into_iter()
                                    .map(|(name, metadata)| ClassicProtocol { name, metadata })
                                    .collect(),
                            }
                        }),
                    })
                }),
            (any::<i32>(), any::<i64>()).prop_map(|(e, ts)| {
                RecordValue::ConsumerGroupTargetAssignmentMetadata(
                    ConsumerGroupTargetAssignmentMetadataValue {
                        assignment_epoch: e,
                        assignment_timestamp: ts,
                    },
                )
            }),
            proptest::collection::vec((arb_uuid(), arb_i32s()), 0..3).prop_map(|tps| {
                RecordValue::ConsumerGroupTargetAssignmentMember(
                    ConsumerGroupTargetAssignmentMemberValue {
                        topic_partitions: tps
                            .into_iter()
                            .map(|(topic_id, partitions)| TargetTopicPartitions {
                                topic_id,
                                partitions,
                            })
                            .collect(),
                    },
                )
            }),
            (
                any::<i32>(),
                any::<i32>(),
                prop_oneof![Just(0i8), Just(1), Just(2), Just(127)],
                proptest::collection::vec(arb_current_tp(), 0..3),
                proptest::collection::vec(arb_current_tp(), 0..3)
            )
                .prop_map(|(me, pe, st, a, p)| {
                    RecordValue::ConsumerGroupCurrentMemberAssignment(
                        ConsumerGroupCurrentMemberAssignmentValue {
                            member_epoch: me,
                            previous_member_epoch: pe,
                            state: st,
                            assigned_partitions: a,
                            partitions_pending_revocation: p,
                        },
                    )
                }),
            (arb_strs(), any::<i64>(), any::<i64>()).prop_map(|(topics, version, timestamp)| {
                RecordValue::ConsumerGroupRegularExpression(ConsumerGroupRegularExpressionValue {
                    topics,
                    version,
                    timestamp,
                })
            }),
        ]
    }

    /// The key type that goes with a value, for building whole records.
    fn key_for(v: &RecordValue) -> RecordKey {
        let group = "g".to_string();
        let member_id = "m".to_string();
        match v.record_type() {
            0 => RecordKey::LegacyOffsetCommit {
                group,
                topic: "t".into(),
                partition: 0,
            },
            1 => RecordKey::OffsetCommit {
                group,
                topic: "t".into(),
                partition: 0,
            },
            2 => RecordKey::GroupMetadata { group },
            3 => RecordKey::ConsumerGroupMetadata { group },
            4 => RecordKey::ConsumerGroupPartitionMetadata { group },
            5 => RecordKey::ConsumerGroupMemberMetadata { group, member_id },
            6 => RecordKey::ConsumerGroupTargetAssignmentMetadata { group },
            7 => RecordKey::ConsumerGroupTargetAssignmentMember { group, member_id },
            8 => RecordKey::ConsumerGroupCurrentMemberAssignment { group, member_id },
            _ => RecordKey::ConsumerGroupRegularExpression {
                group,
                regex: "r.*".into(),
            },
        }
    }

    /// Every strict prefix of a valid encoding must be an error (and never a panic).
    fn assert_prefixes_fail(bytes: &[u8], decode: impl Fn(&[u8]) -> Result<()>) {
        for n in 0..bytes.len() {
            assert!(decode(&bytes[..n]).is_err(), "prefix of {n} bytes decoded");
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(512))]

        #[test]
        fn key_round_trip(key in arb_key()) {
            let bytes = key.to_bytes().unwrap();
            prop_assert_eq!(&bytes[..2], &key.record_type().to_be_bytes());
            prop_assert_eq!(RecordKey::decode(&bytes).unwrap(), key);
            assert_prefixes_fail(&bytes, |b| RecordKey::decode(b).map(|_| ()));
        }

        #[test]
        fn value_round_trip(value in arb_value()) {
            let bytes = value.to_bytes().unwrap();
            prop_assert_eq!(&bytes[..2], &value.write_version().to_be_bytes());
            let t = value.record_type();
            prop_assert_eq!(RecordValue::decode(t, &bytes).unwrap(), value.clone());
            assert_prefixes_fail(&bytes, |b| RecordValue::decode(t, b).map(|_| ()));

            let record = Record::new(key_for(&value), value);
            let k = record.encode_key().unwrap();
            let v = record.encode_value().unwrap().unwrap();
            prop_assert_eq!(Record::decode(&k, Some(&v)).unwrap(), record);
        }

        #[test]
        fn every_value_version_round_trips(value in arb_value()) {
            // Encode at each version the type has; decoding and re-encoding at the same version
            // must reproduce the bytes exactly.
            let t = value.record_type();
            for version in 0..=4i16 {
                let mut bytes = Vec::new();
                if value.encode_version(version, &mut bytes).is_err() {
                    continue;
                }
                let (v, decoded) = RecordValue::decode_with_version(t, &bytes).unwrap();
                prop_assert_eq!(v, version);
                let mut again = Vec::new();
                decoded.encode_version(version, &mut again).unwrap();
                prop_assert_eq!(&again, &bytes);
                assert_prefixes_fail(&bytes, |b| RecordValue::decode(t, b).map(|_| ()));
            }
        }

        #[test]
        fn the_borrowed_offset_commit_key_agrees_with_decode(
            key in arb_key(),
            flips in proptest::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 0..3),
            cut in any::<prop::sample::Index>(),
        ) {
            let mut bytes = key.to_bytes().unwrap();
            for (i, b) in flips {
                let i = i.index(bytes.len());
                bytes[i] = b;
            }
            for b in [&bytes[..], &bytes[..cut.index(bytes.len() + 1)]] {
                let full = match RecordKey::decode(b) {
                    Ok(RecordKey::OffsetCommit { group, topic, partition }) => {
                        Some((group, topic, partition))
                    }
                    _ => None,
                };
                let borrowed = RecordKey::offset_commit_ref(b)
                    .map(|(g, t, p)| (g.to_string(), t.to_string(), p));
                prop_assert_eq!(borrowed, full);
            }
        }

        #[test]
        fn the_specialised_offset_commit_decoder_agrees_with_decode(
            value in arb_offset_commit(),
            version in 0i16..=5,
            extra_tag in proptest::option::of((
                prop_oneof![Just(0u32), 1u32..300],
                prop_oneof![arb_bytes(), proptest::collection::vec(any::<u8>(), 15..=17)],
            )),
            flips in proptest::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 0..3),
            cut in any::<prop::sample::Index>(),
        ) {
            // Every version Kafka wrote, then bytes damaged by flips and cuts: whatever the
            // generic decoder says, the fast one must say the same.
            let mut bytes = Vec::new();
            let r = RecordValue::OffsetCommit(value);
            if r.encode_version(version.min(4), &mut bytes).is_err() {
                return Ok(());
            }
            if version == 5 {
                bytes[1] = 5; // a version past the table
            }
            if let (Some((tag, body)), true) = (extra_tag, version == 4) {
                // Another tagged field after the topic id (or alone): an unknown one, or a
                // second topic id of the right size or not.
                let section_start = bytes.len() - if matches!(&r, RecordValue::OffsetCommit(v) if !v.topic_id.is_nil()) { 19 } else { 1 };
                let old: Vec<u8> = bytes.drain(section_start..).collect();
                let mut w = Writer { out: &mut bytes, flexible: true };
                let had_topic = old.len() > 1;
                w.uvarint(1 + u32::from(had_topic));
                if had_topic {
                    w.out.extend_from_slice(&old[1..]);
                }
                w.uvarint(tag);
                w.uvarint(body.len() as u32);
                w.out.extend_from_slice(&body);
                prop_assert_eq!(RecordValue::decode(1, &bytes).is_ok(), tag != 0 || body.len() == 16);
            }
            let mut damaged = bytes.clone();
            for (i, b) in flips {
                let i = i.index(damaged.len());
                damaged[i] = b;
            }
            let cut_at = cut.index(bytes.len() + 1);
            let mut trailing = bytes.clone();
            trailing.push(0);
            for b in [&bytes[..], &damaged[..], &bytes[..cut_at], &damaged[..cut_at], &trailing[..]] {
                let full = match RecordValue::decode(1, b) {
                    Ok(RecordValue::OffsetCommit(v)) => Some(v),
                    Ok(other) => panic!("type 1 decoded as {other:?}"),
                    Err(_) => None,
                };
                let fast = OffsetCommitValue::decode_ref(b).map(|v| v.to_owned_value());
                prop_assert_eq!(fast, full);
            }
        }

        #[test]
        fn the_specialised_offset_commit_decoder_agrees_on_random_bytes(
            bytes in proptest::collection::vec(any::<u8>(), 0..48),
            version in 0i16..=5,
        ) {
            let mut b = bytes;
            if b.len() >= 2 {
                b[..2].copy_from_slice(&version.to_be_bytes());
            }
            let full = match RecordValue::decode(1, &b) {
                Ok(RecordValue::OffsetCommit(v)) => Some(v),
                _ => None,
            };
            prop_assert_eq!(OffsetCommitValue::decode_ref(&b).map(|v| v.to_owned_value()), full);
        }

        #[test]
        fn random_bytes_never_panic(
            t in prop_oneof![0i16..=9, Just(16i16), any::<i16>()],
            bytes in proptest::collection::vec(any::<u8>(), 0..64),
        ) {
            let _ = RecordKey::decode(&bytes);
            let _ = RecordValue::decode(t, &bytes);
            let _ = Record::decode(&bytes, Some(&bytes));
        }

        #[test]
        fn mutated_encodings_never_panic(
            value in arb_value(),
            flips in proptest::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 1..4),
        ) {
            let mut bytes = value.to_bytes().unwrap();
            for (i, b) in flips {
                let i = i.index(bytes.len());
                bytes[i] = b;
            }
            let _ = RecordValue::decode(value.record_type(), &bytes);
            // Whatever decodes must re-encode (write-version bytes need not match).
            if let Ok(v) = RecordValue::decode(value.record_type(), &bytes) {
                let _ = v.to_bytes();
            }
        }
    }
}
