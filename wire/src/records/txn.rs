//! `__transaction_state` records, byte-compatible with Kafka's (issue 17's groundwork): the key
//! `TransactionLogKey` and the value `TransactionLogValue` of
//! `transaction-coordinator/src/main/resources/common/message/TransactionLog{Key,Value}.json`,
//! written as `TransactionLog.keyToBytes` / `valueToBytes`
//! (`transaction-coordinator/src/main/java/org/apache/kafka/coordinator/transaction/TransactionLog.java`).
//!
//! - Key: int16 record type 0 (`CoordinatorRecordType.TRANSACTION_LOG`), then the transactional id
//!   as a classic (int16-length) string: the key is version 0 and never flexible.
//! - Value: int16 version, then the fields. Version 0 is classic; version 1 (the first flexible
//!   one) adds tagged fields: PreviousProducerId (tag 0, default −1), NextProducerId (tag 1,
//!   default −1), ClientTransactionVersion (tag 2, default 0), each written only when it is not
//!   its default. Kafka writes version 1 once `transaction.version` ≥ 1 (a new 4.x cluster is at
//!   2), version 0 below that (`TransactionVersion.transactionLogValueVersion`).
//! - The partitions are null while the transaction is Empty (`valueToBytes`).

use super::{Reader, RecordError, Result, Writer};

/// The record type that prefixes every `__transaction_state` key.
pub const TRANSACTION_LOG: i16 = 0;

/// `TransactionState` ids (`TransactionState.java`), as `TransactionStatus` stores them.
pub mod status {
    pub const EMPTY: i8 = 0;
    pub const ONGOING: i8 = 1;
    pub const PREPARE_COMMIT: i8 = 2;
    pub const PREPARE_ABORT: i8 = 3;
    pub const COMPLETE_COMMIT: i8 = 4;
    pub const COMPLETE_ABORT: i8 = 5;
    pub const DEAD: i8 = 6;
    pub const PREPARE_EPOCH_FENCE: i8 = 7;
}

/// The value of one transactional id.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TransactionLogValue {
    pub producer_id: i64,
    /// Version 1+, tag 0; −1 when none.
    pub previous_producer_id: i64,
    /// Version 1+, tag 1; −1 when none.
    pub next_producer_id: i64,
    pub producer_epoch: i16,
    pub transaction_timeout_ms: i32,
    /// One of [`status`].
    pub transaction_status: i8,
    /// `None` while the transaction is Empty.
    pub transaction_partitions: Option<Vec<TxnTopicPartitions>>,
    pub transaction_last_update_timestamp_ms: i64,
    pub transaction_start_timestamp_ms: i64,
    /// Version 1+, tag 2: the `transaction.version` the client uses; 0 by default.
    pub client_transaction_version: i16,
}

impl Default for TransactionLogValue {
    fn default() -> Self {
        Self {
            producer_id: -1,
            previous_producer_id: -1,
            next_producer_id: -1,
            producer_epoch: -1,
            transaction_timeout_ms: 0,
            transaction_status: status::EMPTY,
            transaction_partitions: None,
            transaction_last_update_timestamp_ms: -1,
            transaction_start_timestamp_ms: -1,
            client_transaction_version: 0,
        }
    }
}

/// One topic of a transaction (`PartitionsSchema`).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct TxnTopicPartitions {
    pub topic: String,
    pub partition_ids: Vec<i32>,
}

/// The key bytes of `transactional_id`.
pub fn encode_key(transactional_id: &str) -> Result<Vec<u8>> {
    let mut out = Vec::with_capacity(4 + transactional_id.len());
    let mut w = Writer {
        out: &mut out,
        flexible: false,
    };
    w.i16(TRANSACTION_LOG);
    w.string(transactional_id, "TransactionalId")?;
    Ok(out)
}

/// The transactional id of a key; an unknown record type is an error (Kafka's `read` reports
/// it as `UnknownKeyVersion` and skips the record).
pub fn decode_key(bytes: &[u8]) -> Result<String> {
    let mut r = Reader::new(bytes, false);
    let record_type = r.i16("key record type")?;
    if record_type != TRANSACTION_LOG {
        return Err(RecordError::UnknownType(record_type));
    }
    let id = r.string("TransactionalId")?;
    r.finish()?;
    Ok(id)
}

impl TransactionLogValue {
    pub const MAX_VERSION: i16 = 1;

    /// The value bytes at `version` (0 or 1). At version 0 the tagged fields are not written
    /// (they do not exist there).
    pub fn encode(&self, version: i16) -> Result<Vec<u8>> {
        if !(0..=Self::MAX_VERSION).contains(&version) {
            return Err(RecordError::UnsupportedVersion {
                record_type: TRANSACTION_LOG,
                version,
            });
        }
        let mut out = Vec::with_capacity(64);
        let mut w = Writer {
            out: &mut out,
            flexible: version >= 1,
        };
        w.i16(version);
        w.i64(self.producer_id);
        w.i16(self.producer_epoch);
        w.i32(self.transaction_timeout_ms);
        w.i8(self.transaction_status);
        match &self.transaction_partitions {
            None => w.null(false),
            Some(topics) => w.vec(topics, "TransactionPartitions", |w, t| {
                w.string(&t.topic, "Topic")?;
                w.i32_vec(&t.partition_ids, "PartitionIds")?;
                w.end_struct();
                Ok(())
            })?,
        }
        w.i64(self.transaction_last_update_timestamp_ms);
        w.i64(self.transaction_start_timestamp_ms);
        let mut tags = Vec::new();
        if self.previous_producer_id != -1 {
            tags.push((0, self.previous_producer_id.to_be_bytes().to_vec()));
        }
        if self.next_producer_id != -1 {
            tags.push((1, self.next_producer_id.to_be_bytes().to_vec()));
        }
        if self.client_transaction_version != 0 {
            tags.push((2, self.client_transaction_version.to_be_bytes().to_vec()));
        }
        w.tagged_fields(&tags)?;
        Ok(out)
    }

    /// A whole value (version prefix included).
    pub fn decode(bytes: &[u8]) -> Result<Self> {
        let mut r = Reader::new(bytes, false);
        let version = r.i16("value version")?;
        if !(0..=Self::MAX_VERSION).contains(&version) {
            return Err(RecordError::UnsupportedVersion {
                record_type: TRANSACTION_LOG,
                version,
            });
        }
        r.flexible = version >= 1;
        let mut v = TransactionLogValue {
            producer_id: r.i64("ProducerId")?,
            producer_epoch: r.i16("ProducerEpoch")?,
            transaction_timeout_ms: r.i32("TransactionTimeoutMs")?,
            transaction_status: r.i8("TransactionStatus")?,
            ..Default::default()
        };
        // A nullable array: peek at its length, then read it as a counted one.
        let start = r.pos;
        v.transaction_partitions = match r.length("TransactionPartitions", false)? {
            None => None,
            Some(_) => {
                r.pos = start;
                Some(r.vec("TransactionPartitions", 2, |r| {
                    let t = TxnTopicPartitions {
                        topic: r.string("Topic")?,
                        partition_ids: r.i32_vec("PartitionIds")?,
                    };
                    r.end_struct()?;
                    Ok(t)
                })?)
            }
        };
        v.transaction_last_update_timestamp_ms = r.i64("TransactionLastUpdateTimestampMs")?;
        v.transaction_start_timestamp_ms = r.i64("TransactionStartTimestampMs")?;
        if r.flexible {
            let (prev, next, ctv) = (
                &mut v.previous_producer_id,
                &mut v.next_producer_id,
                &mut v.client_transaction_version,
            );
            r.tagged_fields(|tag, sub| match tag {
                0 => {
                    *prev = sub.i64("PreviousProducerId")?;
                    Ok(true)
                }
                1 => {
                    *next = sub.i64("NextProducerId")?;
                    Ok(true)
                }
                2 => {
                    *ctv = sub.i16("ClientTransactionVersion")?;
                    Ok(true)
                }
                _ => Ok(false),
            })?;
        }
        r.finish()?;
        Ok(v)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ongoing() -> TransactionLogValue {
        TransactionLogValue {
            producer_id: 1000,
            producer_epoch: 3,
            transaction_timeout_ms: 60_000,
            transaction_status: status::ONGOING,
            transaction_partitions: Some(vec![TxnTopicPartitions {
                topic: "t".into(),
                partition_ids: vec![0, 2],
            }]),
            transaction_last_update_timestamp_ms: 1_700_000_000_001,
            transaction_start_timestamp_ms: 1_700_000_000_000,
            client_transaction_version: 2,
            ..Default::default()
        }
    }

    #[test]
    fn the_key_is_type_zero_then_a_classic_string() {
        let k = encode_key("txn-1").unwrap();
        assert_eq!(k, [0, 0, 0, 5, b't', b'x', b'n', b'-', b'1']);
        assert_eq!(decode_key(&k).unwrap(), "txn-1");
        assert!(decode_key(&[0, 1, 0, 0]).is_err(), "another record type");
        assert!(decode_key(&[0, 0, 0, 5, b't']).is_err(), "truncated");
    }

    /// The bytes, field by field, as the schema lays them out (version 1: compact lengths,
    /// tagged fields at the end, only the non-default ones).
    #[test]
    fn version_one_is_laid_out_as_the_schema_says() {
        let b = ongoing().encode(1).unwrap();
        let mut want = vec![0, 1]; // version
        want.extend(1000i64.to_be_bytes());
        want.extend(3i16.to_be_bytes());
        want.extend(60_000i32.to_be_bytes());
        want.push(1); // Ongoing
        want.push(2); // one topic (compact: n + 1)
        want.extend([2, b't']); // "t"
        want.push(3); // two partitions
        want.extend(0i32.to_be_bytes());
        want.extend(2i32.to_be_bytes());
        want.push(0); // the topic's tagged fields
        want.extend(1_700_000_000_001i64.to_be_bytes());
        want.extend(1_700_000_000_000i64.to_be_bytes());
        want.extend([1, 2, 2, 0, 2]); // one tagged field: tag 2, 2 bytes, ClientTransactionVersion 2
        assert_eq!(b, want);
        assert_eq!(TransactionLogValue::decode(&b).unwrap(), ongoing());
    }

    #[test]
    fn version_zero_has_classic_lengths_and_no_tagged_fields() {
        let b = ongoing().encode(0).unwrap();
        let mut want = vec![0, 0];
        want.extend(1000i64.to_be_bytes());
        want.extend(3i16.to_be_bytes());
        want.extend(60_000i32.to_be_bytes());
        want.push(1);
        want.extend(1i32.to_be_bytes()); // one topic
        want.extend([0, 1, b't']);
        want.extend(2i32.to_be_bytes());
        want.extend(0i32.to_be_bytes());
        want.extend(2i32.to_be_bytes());
        want.extend(1_700_000_000_001i64.to_be_bytes());
        want.extend(1_700_000_000_000i64.to_be_bytes());
        assert_eq!(b, want);
        let back = TransactionLogValue::decode(&b).unwrap();
        assert_eq!(
            back,
            TransactionLogValue {
                client_transaction_version: 0, // not in version 0
                ..ongoing()
            }
        );
    }

    #[test]
    fn an_empty_transaction_has_null_partitions_and_tagged_ids_round_trip() {
        let v = TransactionLogValue {
            producer_id: 7,
            previous_producer_id: 6,
            next_producer_id: 8,
            producer_epoch: 0,
            transaction_timeout_ms: 1000,
            transaction_status: status::EMPTY,
            transaction_partitions: None,
            ..Default::default()
        };
        for version in [0, 1] {
            let b = v.encode(version).unwrap();
            // The null array: compact 0 at version 1, int32 -1 at version 0.
            let at = 2 + 8 + 2 + 4 + 1;
            if version == 1 {
                assert_eq!(b[at], 0);
            } else {
                assert_eq!(&b[at..at + 4], &(-1i32).to_be_bytes());
            }
            let back = TransactionLogValue::decode(&b).unwrap();
            assert_eq!(back.transaction_partitions, None);
            if version == 1 {
                assert_eq!(back, v);
            } else {
                assert_eq!((back.previous_producer_id, back.next_producer_id), (-1, -1));
            }
        }
    }

    fn hex(s: &str) -> Vec<u8> {
        (0..s.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
            .collect()
    }

    /// The bytes Kafka 4.4.0 writes for the same records: `TransactionLog.keyToBytes("txn-1")`
    /// and `MessageUtil.toVersionPrefixedBytes(version, TransactionLogValue)` from
    /// `kafka-transaction-coordinator-4.4.0.jar`, run on this machine with the classpath of
    /// `scripts/kafka-ref.sh classpath` (2026-12-02).
    #[test]
    fn the_bytes_are_kafkas() {
        assert_eq!(encode_key("txn-1").unwrap(), hex("0000000574786e2d31"));
        let v1 = hex(
            "000100000000000003e800030000ea600102027403000000000000000200000001\
             8bcfe568010000018bcfe568000102020002",
        );
        assert_eq!(ongoing().encode(1).unwrap(), v1);
        assert_eq!(TransactionLogValue::decode(&v1).unwrap(), ongoing());
        let v0 = hex(
            "000000000000000003e800030000ea6001000000010001740000000200000000000000\
             020000018bcfe568010000018bcfe56800",
        );
        let ongoing_v0 = TransactionLogValue {
            client_transaction_version: 0,
            ..ongoing()
        };
        assert_eq!(ongoing_v0.encode(0).unwrap(), v0);
        assert_eq!(TransactionLogValue::decode(&v0).unwrap(), ongoing_v0);
        let empty = TransactionLogValue {
            producer_id: 7,
            previous_producer_id: 6,
            next_producer_id: 8,
            producer_epoch: 0,
            transaction_timeout_ms: 1000,
            ..Default::default()
        };
        let e1 = hex(
            "000100000000000000070000000003e80000ffffffffffffffffffffffffffffffff\
             020008000000000000000601080000000000000008",
        );
        assert_eq!(empty.encode(1).unwrap(), e1);
        assert_eq!(TransactionLogValue::decode(&e1).unwrap(), empty);
    }

    #[test]
    fn bad_values_are_errors_not_panics() {
        let b = ongoing().encode(1).unwrap();
        for cut in 0..b.len() {
            assert!(
                TransactionLogValue::decode(&b[..cut]).is_err(),
                "cut at {cut}"
            );
        }
        let mut extra = b.clone();
        extra.push(0);
        assert!(
            TransactionLogValue::decode(&extra).is_err(),
            "trailing bytes"
        );
        let mut v2 = b;
        v2[1] = 2;
        assert!(
            TransactionLogValue::decode(&v2).is_err(),
            "version 2 is unknown"
        );
        assert!(ongoing().encode(2).is_err());
    }
}
