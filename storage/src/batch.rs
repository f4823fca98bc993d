//! Kafka record batches, magic 2, exactly as Kafka writes them (reference §6,
//! `DefaultRecordBatch.java`, `DefaultRecord.java`), so segment files are Kafka's format and
//! `kafka-dump-log.sh` can read them.
//!
//! Layout (big-endian): BaseOffset i64 · Length i32 (bytes after this field) · PartitionLeaderEpoch
//! i32 · Magic i8 = 2 · CRC u32 (CRC-32C of everything from Attributes to the end) · Attributes
//! i16 · LastOffsetDelta i32 · BaseTimestamp i64 · MaxTimestamp i64 · ProducerId i64 ·
//! ProducerEpoch i16 · BaseSequence i32 · RecordsCount i32 · Records. A record is: Length varint
//! · Attributes i8 · TimestampDelta varlong · OffsetDelta varint · KeyLength varint · Key ·
//! ValueLength varint (-1 = null, a tombstone) · Value · HeadersCount varint.

use thiserror::Error;

/// Bytes before the records: the fixed batch header.
pub const BATCH_OVERHEAD: usize = 61;
/// BaseOffset + Length: what precedes the part `Length` counts.
pub const LOG_OVERHEAD: usize = 12;
const CRC_START: usize = 21;

#[derive(Debug, Error, Clone, PartialEq, Eq)]
pub enum BatchError {
    #[error("batch at byte {pos}: {what}")]
    Corrupt { pos: u64, what: String },
}

fn corrupt(pos: u64, what: impl Into<String>) -> BatchError {
    BatchError::Corrupt {
        pos,
        what: what.into(),
    }
}

/// One record of a batch: key and value bytes (value `None` = tombstone).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LogRecord {
    pub offset: u64,
    pub timestamp: i64,
    pub key: Option<Vec<u8>>,
    pub value: Option<Vec<u8>>,
}

fn put_varint(out: &mut Vec<u8>, v: i64) {
    let mut z = ((v << 1) ^ (v >> 63)) as u64;
    loop {
        if z < 0x80 {
            out.push(z as u8);
            return;
        }
        out.push((z as u8 & 0x7f) | 0x80);
        z >>= 7;
    }
}

fn get_varint(buf: &[u8], pos: &mut usize, max_bytes: usize) -> Option<i64> {
    let mut z: u64 = 0;
    for i in 0..max_bytes {
        let b = *buf.get(*pos)?;
        *pos += 1;
        z |= ((b & 0x7f) as u64) << (7 * i);
        if b & 0x80 == 0 {
            return Some(((z >> 1) as i64) ^ -((z & 1) as i64));
        }
    }
    None
}

/// Attributes bit 4: the batch belongs to a transaction (`RecordBatch.isTransactional`).
pub const ATTR_TRANSACTIONAL: i16 = 0x10;
/// Attributes bit 5: a control batch (its one record is a transaction marker).
pub const ATTR_CONTROL: i16 = 0x20;

/// Who wrote a batch: attributes (only [`ATTR_TRANSACTIONAL`] and [`ATTR_CONTROL`] are set by
/// the coordinator), the producer id and epoch (-1 for a plain coordinator batch), and the base
/// sequence the header carries.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BatchProducer {
    pub attributes: i16,
    pub producer_id: i64,
    pub producer_epoch: i16,
    pub base_sequence: i32,
}

impl BatchProducer {
    /// A plain group coordinator batch: no producer, attributes 0, base sequence 0 (Kafka's
    /// `CoordinatorRuntime` builds its batches with base sequence 0).
    pub const NONE: BatchProducer = BatchProducer {
        attributes: 0,
        producer_id: -1,
        producer_epoch: -1,
        base_sequence: 0,
    };

    /// A plain batch with base sequence -1 (`RecordBatch.NO_SEQUENCE`): what Kafka's transaction
    /// coordinator writes to `__transaction_state` (`TransactionStateManager.appendTransactionToLog`
    /// → `MemoryRecords.withRecords`), as the reference broker's log shows (TxnLogDiffTest).
    pub const NO_SEQUENCE: BatchProducer = BatchProducer {
        base_sequence: -1,
        ..BatchProducer::NONE
    };

    /// A group coordinator batch with these attributes and producer: base sequence 0 for records
    /// (a TxnOffsetCommit's transactional batch too), -1 for a control batch, as Kafka writes a
    /// marker (`MemoryRecords.withEndTransactionMarker`) — both seen in the reference broker's
    /// `__consumer_offsets` (TxnLogDiffTest).
    pub fn coordinator(attributes: i16, producer_id: i64, producer_epoch: i16) -> Self {
        BatchProducer {
            attributes,
            producer_id,
            producer_epoch,
            base_sequence: if attributes & ATTR_CONTROL != 0 {
                -1
            } else {
                0
            },
        }
    }
}

/// Encode one uncompressed batch of `records` (key, value) with offsets `base_offset..`, all
/// stamped `timestamp` (CreateTime), producer id/epoch -1, base sequence 0 and leader epoch 0,
/// as Kafka's coordinator writes them (`CoordinatorRuntime` → `MemoryRecordsBuilder`).
pub fn encode_batch(
    base_offset: u64,
    timestamp: i64,
    records: &[(Option<&[u8]>, Option<&[u8]>)],
    out: &mut Vec<u8>,
) {
    encode_batch_as(base_offset, timestamp, BatchProducer::NONE, records, out)
}

/// [`encode_batch`] for a batch written on behalf of a producer: a transactional batch of
/// offset commits (TxnOffsetCommit), or a control batch holding a transaction marker, as
/// Kafka's coordinator writes them (`CoordinatorRuntime.scheduleTransactionalWriteOperation`,
/// `scheduleTransactionCompletion`: `MemoryRecords.withTransactionalRecords` /
/// `withEndTransactionMarker`), with the producer's base sequence (see [`BatchProducer`]).
pub fn encode_batch_as(
    base_offset: u64,
    timestamp: i64,
    producer: BatchProducer,
    records: &[(Option<&[u8]>, Option<&[u8]>)],
    out: &mut Vec<u8>,
) {
    assert!(!records.is_empty(), "a batch holds at least one record");
    let start = out.len();
    out.extend_from_slice(&(base_offset as i64).to_be_bytes());
    out.extend_from_slice(&0i32.to_be_bytes()); // length, patched below
                                                // The partition leader epoch: a Kafka leader stamps it on every batch it appends, and one
                                                // node that never loses leadership is at epoch 0 (what Metadata reports, and what the
                                                // reference broker's `__consumer_offsets` batches carry).
    out.extend_from_slice(&0i32.to_be_bytes());
    out.push(2); // magic
    out.extend_from_slice(&0u32.to_be_bytes()); // crc, patched below
                                                // attributes: no compression, CreateTime; transactional / control for a producer's batch
    out.extend_from_slice(&producer.attributes.to_be_bytes());
    out.extend_from_slice(&((records.len() - 1) as i32).to_be_bytes());
    out.extend_from_slice(&timestamp.to_be_bytes()); // base timestamp
    out.extend_from_slice(&timestamp.to_be_bytes()); // max timestamp
    out.extend_from_slice(&producer.producer_id.to_be_bytes());
    out.extend_from_slice(&producer.producer_epoch.to_be_bytes());
    out.extend_from_slice(&producer.base_sequence.to_be_bytes());
    out.extend_from_slice(&(records.len() as i32).to_be_bytes());
    let mut body = Vec::with_capacity(64);
    for (delta, (key, value)) in records.iter().enumerate() {
        body.clear();
        body.push(0); // attributes
        put_varint(&mut body, 0); // timestamp delta
        put_varint(&mut body, delta as i64);
        match key {
            Some(k) => {
                put_varint(&mut body, k.len() as i64);
                body.extend_from_slice(k);
            }
            None => put_varint(&mut body, -1),
        }
        match value {
            Some(v) => {
                put_varint(&mut body, v.len() as i64);
                body.extend_from_slice(v);
            }
            None => put_varint(&mut body, -1),
        }
        put_varint(&mut body, 0); // headers
        put_varint(out, body.len() as i64);
        out.extend_from_slice(&body);
    }
    let length = (out.len() - start - LOG_OVERHEAD) as i32;
    out[start + 8..start + 12].copy_from_slice(&length.to_be_bytes());
    let crc = crc32c::crc32c(&out[start + CRC_START..]);
    out[start + 17..start + 21].copy_from_slice(&crc.to_be_bytes());
}

/// Turn an encoded batch (one, at the start of `batch`) into what an idempotent or
/// transactional producer sends: producer id, epoch and base sequence set, the transactional
/// attribute (0x10) set or cleared, CRC recomputed. For tools and tests that play a producer.
pub fn stamp_producer(
    batch: &mut [u8],
    producer_id: i64,
    producer_epoch: i16,
    base_sequence: i32,
    transactional: bool,
) {
    let end = LOG_OVERHEAD
        + i32::from_be_bytes(batch[8..12].try_into().expect("4 bytes")).max(0) as usize;
    let batch = &mut batch[..end];
    batch[43..51].copy_from_slice(&producer_id.to_be_bytes());
    batch[51..53].copy_from_slice(&producer_epoch.to_be_bytes());
    batch[53..57].copy_from_slice(&base_sequence.to_be_bytes());
    let attrs = i16::from_be_bytes([batch[21], batch[22]]);
    let attrs = if transactional {
        attrs | 0x10
    } else {
        attrs & !0x10
    };
    batch[21..23].copy_from_slice(&attrs.to_be_bytes());
    let crc = crc32c::crc32c(&batch[CRC_START..]);
    batch[17..21].copy_from_slice(&crc.to_be_bytes());
}

/// Batch attributes of a transaction marker: transactional (0x10) | control (0x20), codec none,
/// CreateTime.
pub const MARKER_ATTRIBUTES: i16 = 0x30;
/// Control record types of a transaction marker (`ControlRecordType.java`: ABORT 0, COMMIT 1).
pub const CONTROL_ABORT: i16 = 0;
pub const CONTROL_COMMIT: i16 = 1;
/// Bytes of an encoded marker batch: the 61-byte header plus one 17-byte record (length varint
/// 1 + attributes 1 + timestamp delta 1 + offset delta 1 + key length 1 + key 4 + value length 1
/// + value 6 + header count 1), `DefaultRecordBatch.RECORD_BATCH_OVERHEAD +
/// EndTransactionMarker.CURRENT_END_TXN_SCHEMA_RECORD_SIZE`.
pub const MARKER_BATCH_BYTES: usize = 78;

/// Encode a transaction marker (a control batch ending a producer's transaction on a
/// partition) as Kafka's `MemoryRecords.withEndTransactionMarker` builds it
/// (`clients/.../record/MemoryRecords.java`, `MemoryRecordsBuilder.appendEndTxnMarker`): attributes
/// transactional | control, producer id and epoch, base sequence -1 (`NO_SEQUENCE`), leader
/// epoch 0 (this broker's), both timestamps `timestamp`, and one record whose key is the control
/// record key v0 [version i16 = 0, type i16] (`ControlRecordType.recordKey`) and whose value is
/// the end-transaction-marker value v0 [version i16 = 0, coordinator epoch i32]
/// (`EndTransactionMarker.serializeValue`).
pub fn encode_marker(
    base_offset: u64,
    timestamp: i64,
    producer_id: i64,
    producer_epoch: i16,
    commit: bool,
    coordinator_epoch: i32,
    out: &mut Vec<u8>,
) {
    let start = out.len();
    out.extend_from_slice(&(base_offset as i64).to_be_bytes());
    out.extend_from_slice(&((MARKER_BATCH_BYTES - LOG_OVERHEAD) as i32).to_be_bytes());
    out.extend_from_slice(&0i32.to_be_bytes()); // partition leader epoch
    out.push(2); // magic
    out.extend_from_slice(&0u32.to_be_bytes()); // crc, patched below
    out.extend_from_slice(&MARKER_ATTRIBUTES.to_be_bytes());
    out.extend_from_slice(&0i32.to_be_bytes()); // last offset delta
    out.extend_from_slice(&timestamp.to_be_bytes()); // base timestamp
    out.extend_from_slice(&timestamp.to_be_bytes()); // max timestamp
    out.extend_from_slice(&producer_id.to_be_bytes());
    out.extend_from_slice(&producer_epoch.to_be_bytes());
    out.extend_from_slice(&(-1i32).to_be_bytes()); // base sequence: NO_SEQUENCE
    out.extend_from_slice(&1i32.to_be_bytes()); // records count
    let kind = if commit {
        CONTROL_COMMIT
    } else {
        CONTROL_ABORT
    };
    let mut body = Vec::with_capacity(16);
    body.push(0); // record attributes
    put_varint(&mut body, 0); // timestamp delta
    put_varint(&mut body, 0); // offset delta
    put_varint(&mut body, 4);
    body.extend_from_slice(&0i16.to_be_bytes()); // control key version
    body.extend_from_slice(&kind.to_be_bytes());
    put_varint(&mut body, 6);
    body.extend_from_slice(&0i16.to_be_bytes()); // marker value version
    body.extend_from_slice(&coordinator_epoch.to_be_bytes());
    put_varint(&mut body, 0); // headers
    put_varint(out, body.len() as i64);
    out.extend_from_slice(&body);
    debug_assert_eq!(out.len() - start, MARKER_BATCH_BYTES);
    let crc = crc32c::crc32c(&out[start + CRC_START..]);
    out[start + 17..start + 21].copy_from_slice(&crc.to_be_bytes());
}

/// A transaction marker's content: (commit, coordinator epoch), parsed as Kafka's
/// `EndTransactionMarker.deserialize` does: key at least 4 bytes, version >= 0, type ABORT or
/// COMMIT; value at least 6 bytes, version >= 0 (a newer version is read as v0). `None` for a
/// control record that is not a transaction marker or does not parse.
pub fn parse_marker(key: Option<&[u8]>, value: Option<&[u8]>) -> Option<(bool, i32)> {
    let key = key.filter(|k| k.len() >= 4)?;
    let value = value.filter(|v| v.len() >= 6)?;
    let key_version = i16::from_be_bytes([key[0], key[1]]);
    let value_version = i16::from_be_bytes([value[0], value[1]]);
    if key_version < 0 || value_version < 0 {
        return None;
    }
    let commit = match i16::from_be_bytes([key[2], key[3]]) {
        CONTROL_ABORT => false,
        CONTROL_COMMIT => true,
        _ => return None,
    };
    Some((
        commit,
        i32::from_be_bytes(value[2..6].try_into().expect("4 bytes")),
    ))
}

/// Control record type of a KRaft leader change (`ControlRecordType.java`: LEADER_CHANGE 2).
pub const CONTROL_LEADER_CHANGE: i16 = 2;

/// Encode a leader change control batch as KRaft's `MemoryRecords.withLeaderChangeMessage`
/// builds it (`MemoryRecordsBuilder.appendLeaderChangeMessage`): attributes control only (not
/// transactional), producer id and epoch -1, base sequence -1 (`NO_SEQUENCE`), partition leader
/// epoch `leader_epoch`, both timestamps `timestamp`, and one record whose key is the control
/// record key v0 [version i16 = 0, type i16 = 2] and whose value is `LeaderChangeMessage` v0
/// (`ControlRecordUtils.deserializeLeaderChangeMessage` reads it unprefixed). That message is
/// flexible from v0 (`LeaderChangeMessage.json`: `"flexibleVersions": "0+"`), so its arrays are
/// compact (unsigned varint count + 1) and it ends with an empty tagged-field section:
/// [version i16 = 0, leader id i32, voters = [] (0x01), granting voters = [] (0x01), tags (0x00)].
/// The voter sets are left empty: Raft's membership lives elsewhere.
pub fn encode_leader_change(
    base_offset: u64,
    timestamp: i64,
    leader_epoch: i32,
    leader_id: i32,
    out: &mut Vec<u8>,
) {
    let mut value = Vec::with_capacity(9);
    value.extend_from_slice(&0i16.to_be_bytes()); // LeaderChangeMessage version
    value.extend_from_slice(&leader_id.to_be_bytes());
    value.push(1); // Voters: compact array of 0 elements (length + 1)
    value.push(1); // GrantingVoters: the same
    value.push(0); // no tagged fields
    encode_kraft_control(
        base_offset,
        timestamp,
        leader_epoch,
        CONTROL_LEADER_CHANGE,
        &value,
        out,
    );
}

/// A KRaft control batch as `MemoryRecordsBuilder` writes one (`appendControlRecord`): attributes
/// control only, producer id and epoch -1, base sequence -1, partition leader epoch
/// `leader_epoch`, one record keyed [version 0, `control_type`] holding `value`.
fn encode_kraft_control(
    base_offset: u64,
    timestamp: i64,
    leader_epoch: i32,
    control_type: i16,
    value: &[u8],
    out: &mut Vec<u8>,
) {
    let start = out.len();
    let mut key = [0u8; 4];
    key[2..4].copy_from_slice(&control_type.to_be_bytes());
    let producer = BatchProducer {
        attributes: ATTR_CONTROL,
        producer_id: -1,
        producer_epoch: -1,
        base_sequence: -1,
    };
    encode_batch_as(
        base_offset,
        timestamp,
        producer,
        &[(Some(&key), Some(value))],
        out,
    );
    // The partition leader epoch lies before the CRC's range: no CRC to redo.
    out[start + 12..start + 16].copy_from_slice(&leader_epoch.to_be_bytes());
}

/// Whether a control record's key is of `control_type` (version >= 0), as Kafka's
/// `ControlRecordType.parse` reads a key: at least 4 bytes.
fn is_control_type(key: Option<&[u8]>, control_type: i16) -> bool {
    match key {
        Some(k) if k.len() >= 4 => {
            i16::from_be_bytes([k[0], k[1]]) >= 0
                && i16::from_be_bytes([k[2], k[3]]) == control_type
        }
        _ => false,
    }
}

/// Whether a control record's key is a leader change (type 2).
pub fn is_leader_change(key: Option<&[u8]>) -> bool {
    is_control_type(key, CONTROL_LEADER_CHANGE)
}

/// Control record type of KRaft's voter set (`ControlRecordType.java`: KRAFT_VOTERS 6).
pub const CONTROL_KRAFT_VOTERS: i16 = 6;

/// The tagged field of a `VotersRecord` that carries the caller's own encoding of the change
/// (Kafka's reader keeps unknown tags aside and ignores them, `VotersRecord.read`). A large tag,
/// so no field Kafka may add to the record (tags count up from 0) collides with it.
pub const VOTERS_CHANGE_TAG: u32 = 0x524C; // "RL"

/// Most voters a voters record holds (the bound on what [`parse_voters_change`] accepts).
pub const MAX_VOTERS_IN_RECORD: usize = 1024;

fn put_uvarint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8 & 0x7f) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

/// A reader of KRaft's flexible-version control messages (compact arrays and strings, tagged
/// fields), for [`parse_voters_record`] and [`parse_leader_change`].
struct Flex<'a> {
    b: &'a [u8],
    at: usize,
}

impl<'a> Flex<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8], String> {
        let end = self.at.checked_add(n).filter(|&e| e <= self.b.len());
        let end = end.ok_or_else(|| format!("truncated at byte {}", self.at))?;
        let out = &self.b[self.at..end];
        self.at = end;
        Ok(out)
    }
    fn array<const N: usize>(&mut self) -> Result<[u8; N], String> {
        Ok(self.take(N)?.try_into().expect("N bytes"))
    }
    fn i16(&mut self) -> Result<i16, String> {
        self.array().map(i16::from_be_bytes)
    }
    fn i32(&mut self) -> Result<i32, String> {
        self.array().map(i32::from_be_bytes)
    }
    fn uvarint(&mut self) -> Result<u64, String> {
        let mut v = 0u64;
        for shift in (0..35).step_by(7) {
            let byte = self.take(1).map_err(|_| "truncated varint")?[0];
            v |= u64::from(byte & 0x7f) << shift;
            if byte & 0x80 == 0 {
                return Ok(v);
            }
        }
        Err("varint longer than 5 bytes".into())
    }
    /// A compact array's or string's length (these messages hold no null ones).
    fn len(&mut self) -> Result<usize, String> {
        let n = self
            .uvarint()?
            .checked_sub(1)
            .ok_or("a null array or string")?;
        Ok(n as usize)
    }
    fn string(&mut self) -> Result<String, String> {
        let n = self.len()?;
        String::from_utf8(self.take(n)?.to_vec()).map_err(|_| "a string not in UTF-8".into())
    }
    /// A compact array of at most `max` elements, each read by `item`.
    fn items<T>(
        &mut self,
        max: usize,
        mut item: impl FnMut(&mut Self) -> Result<T, String>,
    ) -> Result<Vec<T>, String> {
        let n = self.len()?;
        // Each element takes at least one byte: a bound before anything is allocated.
        if n > max || n > self.b.len() - self.at {
            return Err(format!("an array of {n} elements"));
        }
        (0..n).map(|_| item(self)).collect()
    }
    /// A tagged-field section: (tag, bytes) for each field.
    fn tags(&mut self) -> Result<Vec<(u64, &'a [u8])>, String> {
        let n = self.uvarint()?;
        let mut out = Vec::new();
        for _ in 0..n {
            let tag = self.uvarint()?;
            let len = self.uvarint()? as usize;
            out.push((tag, self.take(len)?));
        }
        Ok(out)
    }
    fn version_0(&mut self, what: &str) -> Result<(), String> {
        match self.i16()? {
            0 => Ok(()),
            v => Err(format!("{what} version {v}, not 0")),
        }
    }
    fn done(&self) -> Result<(), String> {
        match self.b.len() - self.at {
            0 => Ok(()),
            n => Err(format!("{n} bytes after the record")),
        }
    }
}

/// One voter of a `VotersRecord`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecordVoter {
    pub id: i32,
    pub directory_id: [u8; 16],
    /// (listener name, host, port)
    pub endpoints: Vec<(String, String, u16)>,
    /// KRaftVersionFeature: (min, max) supported.
    pub kraft_versions: (i16, i16),
}

/// A `VotersRecord` v0 and the change [`encode_voters_change`] tagged into it, if any.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VotersRecord {
    pub voters: Vec<RecordVoter>,
    pub change: Option<Vec<u8>>,
}

/// Any `VotersRecord` v0 (Kafka's own too): an error saying why for what does not parse whole.
pub fn parse_voters_record(value: &[u8]) -> Result<VotersRecord, String> {
    let mut f = Flex { b: value, at: 0 };
    f.version_0("VotersRecord")?;
    let voters = f.items(MAX_VOTERS_IN_RECORD, |f| {
        let id = f.i32()?;
        let directory_id = f.array()?;
        let endpoints = f.items(usize::MAX, |f| {
            let endpoint = (f.string()?, f.string()?, u16::from_be_bytes(f.array()?));
            f.tags()?;
            Ok(endpoint)
        })?;
        let kraft_versions = (f.i16()?, f.i16()?);
        f.tags()?; // KRaftVersionFeature's
        f.tags()?; // the voter's
        Ok(RecordVoter {
            id,
            directory_id,
            endpoints,
            kraft_versions,
        })
    })?;
    let change = f
        .tags()?
        .into_iter()
        .find(|(tag, _)| *tag == u64::from(VOTERS_CHANGE_TAG))
        .map(|(_, b)| b.to_vec());
    f.done()?;
    Ok(VotersRecord { voters, change })
}

/// A `LeaderChangeMessage` v0: (leader id, voters, granting voters).
pub fn parse_leader_change(value: &[u8]) -> Result<(i32, Vec<i32>, Vec<i32>), String> {
    let mut f = Flex { b: value, at: 0 };
    f.version_0("LeaderChangeMessage")?;
    let leader = f.i32()?;
    let mut voters = || {
        f.items(usize::MAX, |f| {
            let id = f.i32()?;
            f.tags()?;
            Ok(id)
        })
    };
    let (voters, granting) = (voters()?, voters()?);
    f.tags()?;
    f.done()?;
    Ok((leader, voters, granting))
}

/// Encode a configuration change as a KRaft voters control batch, as KRaft's
/// `MemoryRecords.withVotersRecord` builds one (the leader change's layout above, key type 6),
/// so `kafka-dump-log` shows the voters a change leads to. The value is `VotersRecord` v0
/// (`VotersRecord.json`, flexible from v0): [version i16 = 0, voters (compact array), each
/// [voter id i32, directory id (uuid, zero: directory ids are not tracked), endpoints = []
/// (0x01), KRaftVersionFeature {min 0, max 1, no tags}, no tags], then one tagged field,
/// [`VOTERS_CHANGE_TAG`], holding `change`, the caller's own encoding of the change (what a
/// restart needs to redo it, which the voter list alone does not say).
pub fn encode_voters_change(
    base_offset: u64,
    timestamp: i64,
    leader_epoch: i32,
    voters: &[i32],
    change: &[u8],
    out: &mut Vec<u8>,
) {
    assert!(voters.len() <= MAX_VOTERS_IN_RECORD, "too many voters");
    let mut value = Vec::with_capacity(8 + voters.len() * 27 + change.len());
    value.extend_from_slice(&0i16.to_be_bytes()); // VotersRecord version
    put_uvarint(&mut value, voters.len() as u64 + 1);
    for id in voters {
        value.extend_from_slice(&id.to_be_bytes());
        value.extend_from_slice(&[0; 16]); // VoterDirectoryId: Uuid.ZERO_UUID
        value.push(1); // Endpoints: []
        value.extend_from_slice(&0i16.to_be_bytes()); // MinSupportedVersion
        value.extend_from_slice(&1i16.to_be_bytes()); // MaxSupportedVersion
        value.push(0); // KRaftVersionFeature's tagged fields
        value.push(0); // the voter's tagged fields
    }
    value.push(1); // one tagged field
    put_uvarint(&mut value, u64::from(VOTERS_CHANGE_TAG));
    put_uvarint(&mut value, change.len() as u64);
    value.extend_from_slice(change);
    encode_kraft_control(
        base_offset,
        timestamp,
        leader_epoch,
        CONTROL_KRAFT_VOTERS,
        &value,
        out,
    );
}

/// Whether a control record's key is a KRaft voters record (type 6).
pub fn is_voters(key: Option<&[u8]>) -> bool {
    is_control_type(key, CONTROL_KRAFT_VOTERS)
}

/// The voters and the change [`encode_voters_change`] wrote into a `VotersRecord` value; any
/// v0 record is read ([`parse_voters_record`]), but one without the change's tagged field is an
/// error too.
pub fn parse_voters_change(value: &[u8]) -> Result<(Vec<i32>, Vec<u8>), String> {
    let record = parse_voters_record(value)?;
    let change = record
        .change
        .ok_or("no change tagged in the record (not written by Ringleader)")?;
    Ok((record.voters.iter().map(|v| v.id).collect(), change))
}

/// The header fields of a batch that readers need.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BatchHeader {
    pub base_offset: u64,
    /// Total bytes of the batch including BaseOffset and Length.
    pub size: usize,
    pub last_offset_delta: i32,
    pub records_count: i32,
    pub attributes: i16,
    /// -1 for a batch no producer wrote (every plain coordinator batch).
    pub producer_id: i64,
    pub producer_epoch: i16,
}

impl BatchHeader {
    pub fn last_offset(&self) -> u64 {
        self.base_offset + self.last_offset_delta.max(0) as u64
    }

    pub fn is_transactional(&self) -> bool {
        self.attributes & ATTR_TRANSACTIONAL != 0
    }

    pub fn is_control(&self) -> bool {
        self.attributes & ATTR_CONTROL != 0
    }
}

/// Outcome of looking at the bytes at the start of `buf`.
#[derive(Debug, PartialEq, Eq)]
pub enum Peek {
    /// A whole, CRC-valid batch.
    Batch(BatchHeader),
    /// Not enough bytes for the batch the header announces (a torn tail, or read more).
    Incomplete { needed: usize },
}

/// Validate the batch at the start of `buf` (`pos` is its file position, for messages).
/// `max_batch` bounds a length field so a corrupt one cannot make a reader allocate wildly.
pub fn peek_batch(buf: &[u8], pos: u64, max_batch: usize) -> Result<Peek, BatchError> {
    if buf.len() < LOG_OVERHEAD {
        return Ok(Peek::Incomplete {
            needed: LOG_OVERHEAD,
        });
    }
    let base_offset = i64::from_be_bytes(buf[0..8].try_into().expect("8 bytes"));
    let length = i32::from_be_bytes(buf[8..12].try_into().expect("4 bytes"));
    if base_offset < 0 {
        return Err(corrupt(pos, format!("negative base offset {base_offset}")));
    }
    if length < (BATCH_OVERHEAD - LOG_OVERHEAD) as i32 || length as usize > max_batch {
        return Err(corrupt(pos, format!("batch length {length} out of range")));
    }
    let size = LOG_OVERHEAD + length as usize;
    if buf.len() < size {
        return Ok(Peek::Incomplete { needed: size });
    }
    let b = &buf[..size];
    if b[16] != 2 {
        return Err(corrupt(pos, format!("magic {} is not 2", b[16])));
    }
    let stored = u32::from_be_bytes(b[17..21].try_into().expect("4 bytes"));
    let computed = crc32c::crc32c(&b[CRC_START..]);
    if stored != computed {
        return Err(corrupt(
            pos,
            format!("CRC mismatch: stored {stored:#010x}, computed {computed:#010x}"),
        ));
    }
    let attributes = i16::from_be_bytes([b[21], b[22]]);
    let last_offset_delta = i32::from_be_bytes(b[23..27].try_into().expect("4 bytes"));
    let records_count = i32::from_be_bytes(b[57..61].try_into().expect("4 bytes"));
    if records_count < 0 || last_offset_delta < 0 {
        return Err(corrupt(pos, "negative record count or offset delta"));
    }
    // Offsets are i64 in the format; a last offset past i64::MAX cannot be written back.
    if base_offset
        .checked_add(i64::from(last_offset_delta))
        .is_none()
    {
        return Err(corrupt(
            pos,
            format!("last offset {base_offset} + {last_offset_delta} is past i64::MAX"),
        ));
    }
    let producer_id = i64::from_be_bytes(b[43..51].try_into().expect("8 bytes"));
    let producer_epoch = i16::from_be_bytes([b[51], b[52]]);
    Ok(Peek::Batch(BatchHeader {
        base_offset: base_offset as u64,
        size,
        last_offset_delta,
        records_count,
        attributes,
        producer_id,
        producer_epoch,
    }))
}

/// Visit the records of a batch that `peek_batch` accepted, borrowing keys and values from the
/// batch (no copies: replay speed depends on it). Compressed batches are not produced by the
/// coordinator (codec 0 by default) and are reported as corrupt here.
pub fn for_each_record(
    batch: &[u8],
    header: &BatchHeader,
    pos: u64,
    mut f: impl FnMut(u64, i64, Option<&[u8]>, Option<&[u8]>),
) -> Result<(), BatchError> {
    for_each_record_span(batch, header, pos, |_, o, t, k, v| f(o, t, k, v))
}

/// Where one record's parts lie in its batch, as [`for_each_record_checked`] keeps it between
/// its two steps: 32 bytes, no `Option`s (a length of -1 is null).
#[derive(Debug, Clone, Copy, Default)]
pub struct RecordSpan {
    offset_delta: i64,
    timestamp_delta: i64,
    key_start: u32,
    key_len: i32,
    value_start: u32,
    value_len: i32,
}

/// One record as [`parse_record`] found it: its byte range (length varint included) and the
/// (start, length) of its key and value, length -1 for null.
struct Parsed {
    start: usize,
    end: usize,
    timestamp_delta: i64,
    offset_delta: i64,
    key: (usize, i64),
    value: (usize, i64),
}

/// A varint, with a fast path for the one-byte case (most lengths and deltas).
#[inline(always)]
fn varint(buf: &[u8], pos: &mut usize, max_bytes: usize) -> Option<i64> {
    match buf.get(*pos) {
        Some(&b) if b < 0x80 => {
            *pos += 1;
            Some(((b >> 1) as i64) ^ -((b & 1) as i64))
        }
        _ => get_varint(buf, pos, max_bytes),
    }
}

/// Parse the record at `*p` (Kafka's `DefaultRecord.readFrom` checks), leaving `*p` at its end.
/// `end` is the batch's end. The one parser behind every record walk, so they all accept and
/// refuse the same bytes. The error is what was bad; the caller builds the `BatchError` (a
/// small error type keeps this loop in registers).
#[inline(always)]
fn parse_record(batch: &[u8], p: &mut usize, end: usize) -> Result<Parsed, &'static str> {
    let rec_start = *p;
    let len = varint(batch, p, 5).ok_or("length")?;
    if len < 0 || *p + len as usize > end {
        return Err("length past the batch");
    }
    let rec_end = *p + len as usize;
    *p += 1; // attributes
    let timestamp_delta = varint(batch, p, 10).ok_or("timestamp delta")?;
    let offset_delta = varint(batch, p, 5).ok_or("offset delta")?;
    if offset_delta < 0 {
        return Err("negative offset delta");
    }
    let key = bytes_field(batch, p, rec_end).ok_or("key")?;
    let value = bytes_field(batch, p, rec_end).ok_or("value")?;
    if *p > rec_end {
        return Err("overran its length");
    }
    // Headers are not used by the coordinator; skip to the record's end.
    *p = rec_end;
    Ok(Parsed {
        start: rec_start,
        end: rec_end,
        timestamp_delta,
        offset_delta,
        key,
        value,
    })
}

/// A key or value: varint length (negative = null) and that many bytes within the record.
#[inline(always)]
fn bytes_field(batch: &[u8], p: &mut usize, rec_end: usize) -> Option<(usize, i64)> {
    let n = varint(batch, p, 5)?;
    if n < 0 {
        return Some((*p, -1));
    }
    if *p + n as usize > rec_end {
        return None;
    }
    let r = (*p, n);
    *p += n as usize;
    Some(r)
}

fn record_error(pos: u64, what: &str) -> BatchError {
    corrupt(pos, format!("record: {what}"))
}

fn check_uncompressed(header: &BatchHeader, pos: u64) -> Result<(), BatchError> {
    if header.attributes & 0x07 != 0 {
        return Err(corrupt(
            pos,
            format!(
                "compressed batches (codec {}) are not supported",
                header.attributes & 0x07
            ),
        ));
    }
    Ok(())
}

/// Validate every record of a batch, then visit them all: a batch that fails half-way reaches
/// `f` not at all (recovery cuts it). Each record is parsed once; `scratch` holds the spans
/// between the two steps and is reused across batches.
pub fn for_each_record_checked(
    batch: &[u8],
    header: &BatchHeader,
    pos: u64,
    scratch: &mut Vec<RecordSpan>,
    mut f: impl FnMut(u64, i64, Option<&[u8]>, Option<&[u8]>),
) -> Result<(), BatchError> {
    check_uncompressed(header, pos)?;
    let base_ts = i64::from_be_bytes(batch[27..35].try_into().expect("8 bytes"));
    scratch.clear();
    // A record takes at least 7 bytes; the count is bounded by what the batch can hold.
    scratch.reserve((header.records_count as usize).min(header.size / 7));
    let mut p = BATCH_OVERHEAD;
    for _ in 0..header.records_count {
        let r = parse_record(batch, &mut p, header.size).map_err(|w| record_error(pos, w))?;
        // Positions and lengths fit: a batch is at most i32::MAX bytes.
        scratch.push(RecordSpan {
            offset_delta: r.offset_delta,
            timestamp_delta: r.timestamp_delta,
            key_start: r.key.0 as u32,
            key_len: r.key.1 as i32,
            value_start: r.value.0 as u32,
            value_len: r.value.1 as i32,
        });
    }
    let part = |start: u32, len: i32| {
        (len >= 0).then(|| &batch[start as usize..start as usize + len as usize])
    };
    for s in scratch.iter() {
        f(
            header.base_offset + s.offset_delta as u64,
            base_ts.wrapping_add(s.timestamp_delta),
            part(s.key_start, s.key_len),
            part(s.value_start, s.value_len),
        );
    }
    Ok(())
}

/// Like [`for_each_record`], also passing each record's byte range within the batch (its
/// length varint included), so compaction can copy kept records verbatim.
pub fn for_each_record_span(
    batch: &[u8],
    header: &BatchHeader,
    pos: u64,
    mut f: impl FnMut(std::ops::Range<usize>, u64, i64, Option<&[u8]>, Option<&[u8]>),
) -> Result<(), BatchError> {
    check_uncompressed(header, pos)?;
    let base_ts = i64::from_be_bytes(batch[27..35].try_into().expect("8 bytes"));
    let mut p = BATCH_OVERHEAD;
    let part = |(start, len): (usize, i64)| (len >= 0).then(|| &batch[start..start + len as usize]);
    for _ in 0..header.records_count {
        let r = parse_record(batch, &mut p, header.size).map_err(|w| record_error(pos, w))?;
        f(
            r.start..r.end,
            header.base_offset + r.offset_delta as u64,
            base_ts.wrapping_add(r.timestamp_delta),
            part(r.key),
            part(r.value),
        );
    }
    Ok(())
}

/// Append to `out` the batch `batch` with only the records `keep(offset, timestamp, key, value)`
/// accepts, as Kafka's log cleaner rewrites a v2 batch (`MemoryRecords.filterTo`): the same
/// header — base offset, last offset delta, base timestamp, producer fields — so every kept
/// record keeps its offset and the next batch still follows; record count, max timestamp and
/// CRC recomputed. Kept records are copied verbatim (their deltas are relative to the unchanged
/// base). Writes nothing when no record is kept. Returns (kept, dropped).
pub fn retain_records(
    batch: &[u8],
    header: &BatchHeader,
    pos: u64,
    mut keep: impl FnMut(u64, i64, Option<&[u8]>, Option<&[u8]>) -> bool,
    out: &mut Vec<u8>,
) -> Result<(usize, usize), BatchError> {
    let mut spans: Vec<(std::ops::Range<usize>, i64)> = Vec::new();
    let mut dropped = 0usize;
    for_each_record_span(batch, header, pos, |span, offset, ts, k, v| {
        if keep(offset, ts, k, v) {
            spans.push((span, ts));
        } else {
            dropped += 1;
        }
    })?;
    if spans.is_empty() {
        return Ok((0, dropped));
    }
    let start = out.len();
    out.extend_from_slice(&batch[..BATCH_OVERHEAD]);
    for (span, _) in &spans {
        out.extend_from_slice(&batch[span.clone()]);
    }
    let length = (out.len() - start - LOG_OVERHEAD) as i32;
    out[start + 8..start + 12].copy_from_slice(&length.to_be_bytes());
    // LogAppendTime batches carry the append time as their max timestamp; keep it.
    if header.attributes & 0x08 == 0 {
        let max_ts = spans.iter().map(|(_, t)| *t).max().expect("non-empty");
        out[start + 35..start + 43].copy_from_slice(&max_ts.to_be_bytes());
    }
    out[start + 57..start + 61].copy_from_slice(&(spans.len() as i32).to_be_bytes());
    let crc = crc32c::crc32c(&out[start + CRC_START..]);
    out[start + 17..start + 21].copy_from_slice(&crc.to_be_bytes());
    Ok((spans.len(), dropped))
}

/// Decode the records of a batch into owned values (tools and tests).
pub fn decode_records(
    batch: &[u8],
    header: &BatchHeader,
    pos: u64,
) -> Result<Vec<LogRecord>, BatchError> {
    let mut out = Vec::with_capacity((header.records_count as usize).min(header.size / 7));
    for_each_record(batch, header, pos, |offset, timestamp, k, v| {
        out.push(LogRecord {
            offset,
            timestamp,
            key: k.map(<[u8]>::to_vec),
            value: v.map(<[u8]>::to_vec),
        })
    })?;
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn varints_match_kafka() {
        // ByteUtils.writeVarint: 0 → 00, -1 → 01, 1 → 02, 63 → 7e, 64 → 80 01, 300 → d8 04.
        for (v, bytes) in [
            (0i64, vec![0u8]),
            (-1, vec![1]),
            (1, vec![2]),
            (63, vec![0x7e]),
            (64, vec![0x80, 1]),
            (300, vec![0xd8, 4]),
        ] {
            let mut out = Vec::new();
            put_varint(&mut out, v);
            assert_eq!(out, bytes, "{v}");
            let mut p = 0;
            assert_eq!(get_varint(&out, &mut p, 10), Some(v));
        }
    }

    #[test]
    fn batch_bytes_are_kafkas() {
        let mut out = Vec::new();
        encode_batch(
            7,
            1_700_000_000_000,
            &[(Some(b"k"), Some(b"vv")), (Some(b"t"), None)],
            &mut out,
        );
        // Hand-built expectation of the fixed header.
        assert_eq!(&out[0..8], &7i64.to_be_bytes());
        assert_eq!(
            i32::from_be_bytes(out[8..12].try_into().unwrap()) as usize,
            out.len() - 12
        );
        assert_eq!(&out[12..16], &0i32.to_be_bytes());
        assert_eq!(out[16], 2);
        assert_eq!(&out[21..23], &[0, 0]);
        assert_eq!(&out[23..27], &1i32.to_be_bytes());
        assert_eq!(&out[43..51], &(-1i64).to_be_bytes());
        assert_eq!(&out[57..61], &2i32.to_be_bytes());
        // Record 1: length 9 (zig-zag 18), attributes 0, ts delta 0, offset delta 0, key len 1 'k', value len 2 "vv", 0 headers.
        assert_eq!(
            &out[61..],
            &[18, 0, 0, 0, 2, b'k', 4, b'v', b'v', 0, 14, 0, 0, 2, 2, b't', 1, 0][..]
        );
        let Peek::Batch(h) = peek_batch(&out, 0, 1 << 20).unwrap() else {
            panic!()
        };
        assert_eq!(
            (h.base_offset, h.last_offset(), h.records_count, h.size),
            (7, 8, 2, out.len())
        );
        let recs = decode_records(&out, &h, 0).unwrap();
        assert_eq!(
            recs[0],
            LogRecord {
                offset: 7,
                timestamp: 1_700_000_000_000,
                key: Some(b"k".to_vec()),
                value: Some(b"vv".to_vec())
            }
        );
        assert_eq!(recs[1].value, None);
    }

    /// The base sequence (bytes 53..57) each kind of coordinator batch carries, as the reference
    /// broker writes them: 0 for a group coordinator's batch and a TxnOffsetCommit's
    /// transactional one, -1 for a marker in `__consumer_offsets` and for `__transaction_state`.
    #[test]
    fn coordinator_batches_carry_kafkas_base_sequence() {
        let rec: &[(Option<&[u8]>, Option<&[u8]>)] = &[(Some(b"k"), Some(b"v"))];
        let seq = |p: BatchProducer| {
            let mut out = Vec::new();
            encode_batch_as(0, 1, p, rec, &mut out);
            assert_eq!(&out[43..51], &p.producer_id.to_be_bytes());
            assert_eq!(&out[21..23], &p.attributes.to_be_bytes());
            i32::from_be_bytes(out[53..57].try_into().unwrap())
        };
        assert_eq!(seq(BatchProducer::NONE), 0);
        assert_eq!(seq(BatchProducer::NO_SEQUENCE), -1);
        assert_eq!(seq(BatchProducer::coordinator(ATTR_TRANSACTIONAL, 5, 1)), 0);
        assert_eq!(
            seq(BatchProducer::coordinator(
                ATTR_TRANSACTIONAL | ATTR_CONTROL,
                5,
                1
            )),
            -1
        );
        // The same as a marker `encode_marker` builds for a data partition.
        let mut marker = Vec::new();
        encode_marker(0, 1, 5, 1, true, 0, &mut marker);
        assert_eq!(&marker[53..57], &(-1i32).to_be_bytes());
    }

    #[test]
    fn a_transaction_marker_is_kafkas_control_batch() {
        // What `MemoryRecords.withEndTransactionMarker(offset 9, ts, leader epoch 0, pid 4242,
        // epoch 3, new EndTransactionMarker(COMMIT, 17))` writes, field by field.
        let mut out = Vec::new();
        encode_marker(9, 1_700_000_000_123, 4242, 3, true, 17, &mut out);
        let mut want = Vec::new();
        want.extend_from_slice(&9i64.to_be_bytes());
        want.extend_from_slice(&66i32.to_be_bytes()); // 78 - 12
        want.extend_from_slice(&0i32.to_be_bytes());
        want.push(2);
        want.extend_from_slice(&[0; 4]); // crc
        want.extend_from_slice(&0x30i16.to_be_bytes());
        want.extend_from_slice(&0i32.to_be_bytes());
        want.extend_from_slice(&1_700_000_000_123i64.to_be_bytes());
        want.extend_from_slice(&1_700_000_000_123i64.to_be_bytes());
        want.extend_from_slice(&4242i64.to_be_bytes());
        want.extend_from_slice(&3i16.to_be_bytes());
        want.extend_from_slice(&(-1i32).to_be_bytes());
        want.extend_from_slice(&1i32.to_be_bytes());
        // Record: length 16 (zig-zag 32), attributes 0, deltas 0, key length 4 (8) [0 0 0 1],
        // value length 6 (12) [0 0 | 0 0 0 17], no headers.
        want.extend_from_slice(&[32, 0, 0, 0, 8, 0, 0, 0, 1, 12, 0, 0, 0, 0, 0, 17, 0]);
        let crc = crc32c::crc32c(&want[CRC_START..]);
        want[17..21].copy_from_slice(&crc.to_be_bytes());
        assert_eq!(out, want);
        assert_eq!(out.len(), MARKER_BATCH_BYTES);
        let Peek::Batch(h) = peek_batch(&out, 0, 1 << 20).unwrap() else {
            panic!()
        };
        assert_eq!(
            (
                h.base_offset,
                h.last_offset(),
                h.records_count,
                h.attributes
            ),
            (9, 9, 1, 0x30)
        );
        let recs = decode_records(&out, &h, 0).unwrap();
        assert_eq!(recs.len(), 1);
        assert_eq!(recs[0].timestamp, 1_700_000_000_123);
        assert_eq!(
            parse_marker(recs[0].key.as_deref(), recs[0].value.as_deref()),
            Some((true, 17))
        );
        out.clear();
        encode_marker(0, 5, 1, 0, false, -1, &mut out);
        let Peek::Batch(h) = peek_batch(&out, 0, 1 << 20).unwrap() else {
            panic!()
        };
        let r = &decode_records(&out, &h, 0).unwrap()[0];
        assert_eq!(r.key.as_deref(), Some(&[0u8, 0, 0, 0][..]));
        assert_eq!(
            parse_marker(r.key.as_deref(), r.value.as_deref()),
            Some((false, -1))
        );
        // Not a transaction marker: a KRaft control type, short key or value, negative version.
        let v = [0u8, 0, 0, 0, 0, 1];
        assert_eq!(parse_marker(Some(&[0, 0, 0, 2]), Some(&v)), None);
        assert_eq!(parse_marker(Some(&[0, 0, 0]), Some(&v)), None);
        assert_eq!(parse_marker(Some(&[0, 0, 0, 1]), Some(&v[..5])), None);
        assert_eq!(parse_marker(Some(&[0xff, 0xff, 0, 1]), Some(&v)), None);
        assert_eq!(parse_marker(None, Some(&v)), None);
        // A newer value version is read as v0, as Kafka does.
        assert_eq!(
            parse_marker(Some(&[0, 0, 0, 1]), Some(&[0, 1, 0, 0, 0, 9, 7])),
            Some((true, 9))
        );
    }

    #[test]
    fn a_leader_change_is_krafts_control_batch() {
        // What `MemoryRecords.withLeaderChangeMessage(offset 5, ts, leader epoch 7, buffer,
        // new LeaderChangeMessage().setLeaderId(3))` writes, field by field.
        let mut out = Vec::new();
        encode_leader_change(5, 1_700_000_000_456, 7, 3, &mut out);
        let mut want = Vec::new();
        want.extend_from_slice(&5i64.to_be_bytes());
        want.extend_from_slice(&69i32.to_be_bytes()); // 81 - 12
        want.extend_from_slice(&7i32.to_be_bytes());
        want.push(2);
        want.extend_from_slice(&[0; 4]); // crc
        want.extend_from_slice(&0x20i16.to_be_bytes()); // control, not transactional
        want.extend_from_slice(&0i32.to_be_bytes());
        want.extend_from_slice(&1_700_000_000_456i64.to_be_bytes());
        want.extend_from_slice(&1_700_000_000_456i64.to_be_bytes());
        want.extend_from_slice(&(-1i64).to_be_bytes());
        want.extend_from_slice(&(-1i16).to_be_bytes());
        want.extend_from_slice(&(-1i32).to_be_bytes());
        want.extend_from_slice(&1i32.to_be_bytes());
        // Record: length 19 (zig-zag 38), attributes 0, deltas 0, key length 4 (8) [0 0 0 2],
        // value length 9 (18) [0 0 | 0 0 0 3 | 1 | 1 | 0], no headers.
        want.extend_from_slice(&[38, 0, 0, 0, 8, 0, 0, 0, 2, 18, 0, 0, 0, 0, 0, 3, 1, 1, 0, 0]);
        let crc = crc32c::crc32c(&want[CRC_START..]);
        want[17..21].copy_from_slice(&crc.to_be_bytes());
        assert_eq!(out, want);
        let Peek::Batch(h) = peek_batch(&out, 0, 1 << 20).unwrap() else {
            panic!()
        };
        assert!(h.is_control() && !h.is_transactional());
        let recs = decode_records(&out, &h, 0).unwrap();
        assert_eq!(recs.len(), 1);
        assert!(is_leader_change(recs[0].key.as_deref()));
        // Not a transaction marker, and a marker is not a leader change.
        assert_eq!(
            parse_marker(recs[0].key.as_deref(), recs[0].value.as_deref()),
            None
        );
        assert!(!is_leader_change(Some(&[0, 0, 0, 1])));
        assert!(!is_leader_change(Some(&[0, 0, 0])));
        assert!(!is_leader_change(Some(&[0xff, 0xff, 0, 2])));
        assert!(!is_leader_change(None));
    }

    #[test]
    fn a_voters_change_is_krafts_voters_control_batch() {
        // What Kafka 4.4 writes for `MemoryRecords.withVotersRecord(offset 5, ts, leader epoch
        // 7, buffer, record)`, the record being voters 1, 2 and 4 (zero directory ids, no
        // endpoints, KRaft versions 0..=1) with an unknown tagged field 0x524C = [9, 8, 7]
        // added (`unknownTaggedFields()`), printed by a jshell-style program against
        // kafka-clients-4.4.0.jar.
        let kafka = "00000000000000050000009a000000070226306db50020000000000000018bcfe569c8\
                     0000018bcfe569c8ffffffffffffffffffffffffffff00000001ce010000000800000006\
                     b801000004000000010000000000000000000000000000000001000000010000000000\
                     020000000000000000000000000000000001000000010000000000040000000000000000\
                     00000000000000000100000001000001cca4010309080700";
        let kafka: Vec<u8> = (0..kafka.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&kafka[i..i + 2], 16).unwrap())
            .collect();
        let mut out = Vec::new();
        encode_voters_change(5, 1_700_000_000_456, 7, &[1, 2, 4], &[9, 8, 7], &mut out);
        assert_eq!(out, kafka);
        let Peek::Batch(h) = peek_batch(&out, 0, 1 << 20).unwrap() else {
            panic!()
        };
        assert!(h.is_control() && !h.is_transactional());
        let recs = decode_records(&out, &h, 0).unwrap();
        assert!(is_voters(recs[0].key.as_deref()));
        assert!(!is_leader_change(recs[0].key.as_deref()));
        assert_eq!(
            parse_marker(recs[0].key.as_deref(), recs[0].value.as_deref()),
            None
        );
        let value = recs[0].value.as_deref().unwrap();
        assert_eq!(
            parse_voters_change(value).unwrap(),
            (vec![1, 2, 4], vec![9, 8, 7])
        );
        // No voters, and a change long enough for a two-byte length.
        let mut out = Vec::new();
        encode_voters_change(0, 0, 1, &[], &[7; 300], &mut out);
        let Peek::Batch(h) = peek_batch(&out, 0, 1 << 20).unwrap() else {
            panic!()
        };
        let recs = decode_records(&out, &h, 0).unwrap();
        let value = recs[0].value.as_deref().unwrap();
        assert_eq!(parse_voters_change(value).unwrap(), (vec![], vec![7; 300]));
        // Refused: every truncation, a trailing byte, no change tag (Kafka's own record), a
        // newer version.
        for cut in 0..value.len() {
            assert!(parse_voters_change(&value[..cut]).is_err(), "cut at {cut}");
        }
        let mut longer = value.to_vec();
        longer.push(0);
        assert!(parse_voters_change(&longer).is_err());
        let mut untagged = value[..3].to_vec(); // version, an empty voters array
        untagged.push(0);
        assert_eq!(
            parse_voters_change(&untagged).unwrap_err(),
            "no change tagged in the record (not written by Ringleader)"
        );
        let mut newer = value.to_vec();
        newer[1] = 1;
        assert!(parse_voters_change(&newer).is_err());
        assert!(!is_voters(Some(&[0, 0, 0, 2])));
        assert!(!is_voters(Some(&[0xff, 0xff, 0, 6])));
        assert!(!is_voters(None));
    }

    #[test]
    fn a_last_offset_past_i64_max_is_corrupt() {
        // fuzz/log_recovery: a CRC-valid batch at base i64::MAX - 1 with three records (the
        // base offset is outside the CRC) was accepted, its last offset past i64::MAX.
        let mut out = Vec::new();
        encode_batch(
            i64::MAX as u64 - 1,
            1,
            &[(Some(b"a"), None), (Some(b"b"), None), (Some(b"c"), None)],
            &mut out,
        );
        let err = peek_batch(&out, 0, 1 << 20).unwrap_err();
        assert!(err.to_string().contains("past i64::MAX"), "{err}");
        out.clear();
        encode_batch(i64::MAX as u64, 1, &[(Some(b"a"), None)], &mut out);
        let Ok(Peek::Batch(h)) = peek_batch(&out, 0, 1 << 20) else {
            panic!("a batch whose last offset is i64::MAX is valid")
        };
        assert_eq!(h.last_offset(), i64::MAX as u64);
    }

    #[test]
    fn corruption_and_truncation_are_detected() {
        let mut out = Vec::new();
        encode_batch(0, 1, &[(Some(b"key"), Some(b"value"))], &mut out);
        for cut in 0..out.len() {
            assert!(
                matches!(
                    peek_batch(&out[..cut], 0, 1 << 20),
                    Ok(Peek::Incomplete { .. })
                ),
                "cut {cut}"
            );
        }
        for i in 16..out.len() {
            let mut bad = out.clone();
            bad[i] ^= 0x40;
            assert!(
                peek_batch(&bad, 0, 1 << 20).is_err(),
                "flip at {i} undetected"
            );
        }
    }
}
