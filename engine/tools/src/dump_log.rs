//! `ringleader dump-log`: print or verify `__consumer_offsets` and `__transaction_state` segment
//! files, shaped like Kafka's `kafka-dump-log.sh --files X.log --offsets-decoder` /
//! `--transaction-log-decoder` (`tools/.../DumpLogSegments.java`), and topics' data logs.
//!
//! PATH is one segment file or a partition directory (`DATA/__consumer_offsets-<p>`, all its
//! `*.log` segments in offset order). Records are decoded by the partition directory's topic:
//! group records in `__consumer_offsets-<p>`, `TransactionLogKey` / `TransactionLogValue` in
//! `__transaction_state-<p>` (`--transaction-log-decoder` decodes any file that way, as Kafka's
//! flag does). For each segment it prints `Dumping FILE`, `Log starting
//! offset: N`, then one line per batch and one line per record:
//!
//! ```text
//! baseOffset: 0 lastOffset: 1 count: 2 baseSequence: 0 lastSequence: 1 producerId: -1 ... position: 0 CreateTime: 1700000000000 size: 160 magic: 2 compresscodec: none crc: 123 isvalid: true
//! | offset: 0 CreateTime: 1700000000000 keySize: 22 valueSize: 31 sequence: 0 key: {"type":"1","data":{"group":"g","topic":"orders","partition":0}} payload: {"version":"4","data":{"offset":10,"leaderEpoch":-1,"metadata":"","commitTimestamp":1700000000000}}
//! ```
//!
//! Keys print as `{"type":"N","data":{..}}`, values as `{"version":"V","data":{..}}` with the
//! field names of Kafka's generated JSON converters (camelCase of the schema names; fields the
//! version lacks are left out, tagged fields only when not at their default), `<DELETE>` for a
//! tombstone, and `Unknown record type N at offset O, skipping.` for a type this build does not
//! decode — Kafka's exact strings. As in Kafka, bytes are base64 and UUIDs use Kafka's URL-safe
//! base64 form; a classic group of protocol type `consumer` has its members' subscription and
//! assignment decoded (`ConsumerProtocolSubscription`/`Assignment`), other bytes stay base64.
//! Each record line also carries its header keys (`headerKeys: [..]`, empty for the coordinator's
//! records), as Kafka's does.
//!
//! `--verify` prints nothing per record: it checks every batch (length, magic, CRC-32C, record
//! framing, offsets never going back) exactly as the broker's recovery does and prints either
//! `OK: N batches, M records, B bytes` or `CORRUPT at byte offset X of FILE: reason` (exit 1).
//! Records whose bytes do not decode (the broker skips them) are reported as `WARNING:` lines.
//!
//! Exit codes: 0 ok, 1 corruption found by `--verify` or an I/O error, 2 bad arguments.

use serde::ser::{SerializeMap, SerializeSeq};
use serde::{Serialize, Serializer};
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use storage::batch::{for_each_record_span, BatchHeader};
use wire::records::{
    txn, ConsumerGroupCurrentMemberAssignmentValue, CurrentTopicPartitions, GroupMetadataValue,
    RecordError, RecordKey, RecordValue,
};

/// `ringleader dump-log PATH [--verify] [--print-data-log]`.
#[derive(clap::Args, Debug, Clone)]
pub struct DumpLogArgs {
    /// A segment file (`<20-digit base offset>.log`) or a partition directory
    /// (`DATA/__consumer_offsets-<p>` or `DATA/<topic>-<p>`: all its `.log` segments in offset
    /// order). `__consumer_offsets` records are decoded as group records; a topic's records are
    /// printed as text with `--print-data-log`.
    pub path: PathBuf,
    /// Check every batch (length, magic, CRC-32C, record framing, offsets going forward) as the
    /// broker's recovery does, without printing records. Prints `OK: N batches, M records, B
    /// bytes`, or `CORRUPT at byte offset X of FILE: reason` and exits 1.
    #[arg(long)]
    pub verify: bool,
    /// Print record keys and values of a topic's data log. `__consumer_offsets` records are always
    /// decoded (which implies it in kafka-dump-log.sh too).
    #[arg(long)]
    pub print_data_log: bool,
    /// Accepted for kafka-dump-log.sh compatibility: records are always decoded this way.
    #[arg(long, hide = true)]
    pub offsets_decoder: bool,
    /// Decode records as `__transaction_state` records (`TransactionLogKey` / `Value`), whatever
    /// the directory; a `__transaction_state-<p>` directory's are decoded so without it.
    #[arg(long)]
    pub transaction_log_decoder: bool,
}

pub const EXIT_OK: i32 = 0;
/// Corruption found by `--verify`, or a file that could not be read.
pub const EXIT_FAILURE: i32 = 1;
/// Bad arguments: no such path, a directory without segments.
pub const EXIT_USAGE: i32 = 2;

/// Largest batch accepted (the broker's `LogConfig` default); a longer length is corruption.
fn max_batch_bytes() -> usize {
    storage::log::LogConfig::default().max_batch_bytes
}

/// Run the command, writing results to `out` and problems with the arguments or files to `err`.
/// Returns the process exit code.
pub fn run(args: &DumpLogArgs, out: &mut dyn Write, err: &mut dyn Write) -> i32 {
    let mut buffered = io::BufWriter::with_capacity(1 << 16, out);
    let code = run_buffered(args, &mut buffered, err);
    match buffered.flush() {
        Ok(()) => code,
        Err(e) => write_failed(e, err).max(code),
    }
}

fn run_buffered(args: &DumpLogArgs, out: &mut dyn Write, err: &mut dyn Write) -> i32 {
    let files = match segment_files(&args.path) {
        Ok(f) => f,
        Err((code, msg)) => {
            let _ = writeln!(err, "ringleader dump-log: {msg}");
            return code;
        }
    };
    let mut totals = Totals::default();
    for file in &files {
        let mut scan = Scanner {
            out: &mut *out,
            verify: args.verify,
            kind: if args.transaction_log_decoder {
                LogKind::Transactions
            } else {
                log_kind(file)
            },
            print_data: args.print_data_log,
            file,
            expected: segment_base(file).unwrap_or(0).max(totals.next_offset),
            totals: &mut totals,
            stop: None,
            write_error: None,
        };
        if !args.verify {
            if let Err(e) = scan.header() {
                return write_failed(e, err);
            }
        }
        let scanned = storage::log::scan_segment_file(file, max_batch_bytes(), |pos, h, bytes| {
            scan.batch(pos, h, bytes)
        });
        if let Some(e) = scan.write_error.take() {
            return write_failed(e, err);
        }
        let problem = match scanned {
            Ok(p) => scan.stop.take().or(p),
            Err(e) => {
                let _ = writeln!(
                    err,
                    "ringleader dump-log: cannot read {}: {e}",
                    file.display()
                );
                return EXIT_FAILURE;
            }
        };
        let Some((pos, reason)) = problem else {
            continue;
        };
        if args.verify {
            let r = writeln!(
                out,
                "CORRUPT at byte offset {pos} of {}: {reason}",
                file.display()
            );
            return match r {
                Ok(()) => EXIT_FAILURE,
                Err(e) => write_failed(e, err),
            };
        }
        let len = std::fs::metadata(file).map(|m| m.len()).unwrap_or(pos);
        let name = file
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        if let Err(e) = writeln!(
            out,
            "Found {} invalid bytes at the end of {name} (byte offset {pos}: {reason})",
            len.saturating_sub(pos)
        ) {
            return write_failed(e, err);
        }
    }
    if args.verify {
        if let Err(e) = writeln!(
            out,
            "OK: {} batches, {} records, {} bytes",
            totals.batches, totals.records, totals.bytes
        ) {
            return write_failed(e, err);
        }
    }
    EXIT_OK
}

fn write_failed(e: io::Error, err: &mut dyn Write) -> i32 {
    if e.kind() == io::ErrorKind::BrokenPipe {
        return EXIT_OK; // `dump-log ... | head`
    }
    let _ = writeln!(err, "ringleader dump-log: cannot write output: {e}");
    EXIT_FAILURE
}

/// The base offset in a segment file's name (`<20 digits>.log`).
/// Whose records a segment holds, and so how they are decoded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum LogKind {
    /// `__consumer_offsets`: group records.
    Offsets,
    /// `__transaction_state`: transaction records.
    Transactions,
    /// A topic's data: bytes, printed as text with `--print-data-log`.
    Data,
}

/// The kind of a segment by its directory (`__consumer_offsets-<p>`, `__transaction_state-<p>`,
/// else a topic's); a file with no directory name is taken for `__consumer_offsets`.
fn log_kind(file: &Path) -> LogKind {
    let Some(dir) = file.parent().and_then(|d| d.file_name()) else {
        return LogKind::Offsets;
    };
    let dir = dir.to_string_lossy();
    if dir.starts_with("__consumer_offsets-") {
        LogKind::Offsets
    } else if dir.starts_with("__transaction_state-") {
        LogKind::Transactions
    } else {
        LogKind::Data
    }
}

fn segment_base(path: &Path) -> Option<u64> {
    let stem = path.file_name()?.to_str()?.strip_suffix(".log")?;
    (stem.len() == 20 && stem.bytes().all(|b| b.is_ascii_digit()))
        .then(|| stem.parse().ok())
        .flatten()
}

/// The segment files PATH names, in offset order; Err((exit code, message)).
fn segment_files(path: &Path) -> Result<Vec<PathBuf>, (i32, String)> {
    let meta = match std::fs::metadata(path) {
        Ok(m) => m,
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            return Err((
                EXIT_USAGE,
                format!("{}: no such file or directory", path.display()),
            ))
        }
        Err(e) => return Err((EXIT_FAILURE, format!("{}: {e}", path.display()))),
    };
    if meta.is_file() {
        return Ok(vec![path.to_path_buf()]);
    }
    if !meta.is_dir() {
        return Err((
            EXIT_USAGE,
            format!("{}: not a segment file or a directory", path.display()),
        ));
    }
    let entries =
        std::fs::read_dir(path).map_err(|e| (EXIT_FAILURE, format!("{}: {e}", path.display())))?;
    let mut files = Vec::new();
    for entry in entries {
        let entry = entry.map_err(|e| (EXIT_FAILURE, format!("{}: {e}", path.display())))?;
        let p = entry.path();
        if p.extension().is_some_and(|x| x == "log") && p.is_file() {
            files.push(p);
        }
    }
    if files.is_empty() {
        return Err((
            EXIT_USAGE,
            format!(
                "{}: no .log segment files in this directory",
                path.display()
            ),
        ));
    }
    files.sort_by(|a, b| {
        (segment_base(a).unwrap_or(u64::MAX), a.file_name())
            .cmp(&(segment_base(b).unwrap_or(u64::MAX), b.file_name()))
    });
    Ok(files)
}

#[derive(Default)]
struct Totals {
    batches: u64,
    records: u64,
    bytes: u64,
    /// The offset the next batch must not go below (the broker's recovery rule).
    next_offset: u64,
}

/// Walks the batches of one segment, printing (dump) or counting (verify). The first problem
/// stops it, as recovery truncates there.
struct Scanner<'a> {
    out: &'a mut dyn Write,
    verify: bool,
    /// How records are decoded: group records, transaction records, or a topic's data (printed
    /// as text with `--print-data-log`; its compressed batches as batches only).
    kind: LogKind,
    print_data: bool,
    file: &'a Path,
    expected: u64,
    totals: &'a mut Totals,
    stop: Option<(u64, String)>,
    write_error: Option<io::Error>,
}

/// Batch header fields that `BatchHeader` does not carry, read from the validated batch bytes.
struct BatchInfo {
    partition_leader_epoch: i32,
    crc: u32,
    base_timestamp: i64,
    max_timestamp: i64,
    producer_id: i64,
    producer_epoch: i16,
    base_sequence: i32,
}

impl BatchInfo {
    fn read(b: &[u8]) -> Self {
        let i16_at = |p: usize| i16::from_be_bytes([b[p], b[p + 1]]);
        let i32_at = |p: usize| i32::from_be_bytes(b[p..p + 4].try_into().expect("4 bytes"));
        let i64_at = |p: usize| i64::from_be_bytes(b[p..p + 8].try_into().expect("8 bytes"));
        BatchInfo {
            partition_leader_epoch: i32_at(12),
            crc: u32::from_be_bytes(b[17..21].try_into().expect("4 bytes")),
            base_timestamp: i64_at(27),
            max_timestamp: i64_at(35),
            producer_id: i64_at(43),
            producer_epoch: i16_at(51),
            base_sequence: i32_at(53),
        }
    }
}

/// Kafka's `DefaultRecordBatch.incrementSequence`: sequences wrap at `i32::MAX` to 0.
fn increment_sequence(sequence: i32, increment: i32) -> i32 {
    if sequence == -1 {
        return -1;
    }
    if sequence > i32::MAX - increment {
        increment - (i32::MAX - sequence) - 1
    } else {
        sequence + increment
    }
}

fn codec_name(attributes: i16) -> String {
    match attributes & 0x07 {
        0 => "none".into(),
        1 => "gzip".into(),
        2 => "snappy".into(),
        3 => "lz4".into(),
        4 => "zstd".into(),
        n => format!("unknown({n})"),
    }
}

/// One record of a batch, owned (keys and values are borrowed only inside `for_each_record`).
struct Rec {
    offset: u64,
    timestamp: i64,
    key: Option<Vec<u8>>,
    value: Option<Vec<u8>>,
    /// The keys of the record's headers, which Kafka's tool prints (`headerKeys: [a,b]`).
    header_keys: Vec<String>,
}

/// The header keys of one record (its bytes from the length varint to its end): after the
/// attributes, timestamp and offset deltas, key and value come the headers, each a key and a
/// value with varint lengths. Malformed headers give what was read before them (the record's
/// framing was already checked by the batch reader, which skips headers).
fn record_header_keys(rec: &[u8]) -> Vec<String> {
    fn varint(b: &[u8], p: &mut usize) -> Option<i64> {
        let mut z: u64 = 0;
        for i in 0..10 {
            let x = *b.get(*p)?;
            *p += 1;
            z |= ((x & 0x7f) as u64) << (7 * i);
            if x & 0x80 == 0 {
                return Some(((z >> 1) as i64) ^ -((z & 1) as i64));
            }
        }
        None
    }
    let mut keys = Vec::new();
    let mut p = 0;
    let parse = |keys: &mut Vec<String>, p: &mut usize| -> Option<()> {
        varint(rec, p)?; // length
        *p += 1; // attributes
        varint(rec, p)?; // timestamp delta
        varint(rec, p)?; // offset delta
        for _ in 0..2 {
            let n = varint(rec, p)?; // key, then value
            if n > 0 {
                *p += n as usize;
            }
        }
        let count = varint(rec, p)?;
        for _ in 0..count.max(0) {
            let n = varint(rec, p)?;
            let key = rec.get(*p..*p + n.max(0) as usize)?;
            keys.push(String::from_utf8_lossy(key).into_owned());
            *p += n.max(0) as usize;
            let v = varint(rec, p)?;
            if v > 0 {
                *p += v as usize;
            }
        }
        Some(())
    };
    let _ = parse(&mut keys, &mut p);
    keys
}

impl Scanner<'_> {
    fn header(&mut self) -> io::Result<()> {
        writeln!(self.out, "Dumping {}", self.file.display())?;
        if let Some(base) = segment_base(self.file) {
            writeln!(self.out, "Log starting offset: {base}")?;
        }
        Ok(())
    }

    fn batch(&mut self, pos: u64, h: &BatchHeader, bytes: &[u8]) {
        if self.stop.is_some() || self.write_error.is_some() {
            return;
        }
        if h.base_offset < self.expected {
            self.stop = Some((
                pos,
                format!(
                    "batch base offset {} goes back (expected >= {})",
                    h.base_offset, self.expected
                ),
            ));
            return;
        }
        let mut recs = Vec::with_capacity((h.records_count as usize).min(bytes.len() / 7));
        let compressed_data = self.kind == LogKind::Data && h.attributes & 0x07 != 0;
        let framing = if compressed_data {
            Ok(()) // the CRC covers it; its records are not decompressed here
        } else {
            for_each_record_span(bytes, h, pos, |span, offset, timestamp, k, v| {
                recs.push(Rec {
                    offset,
                    timestamp,
                    key: k.map(<[u8]>::to_vec),
                    value: v.map(<[u8]>::to_vec),
                    header_keys: record_header_keys(&bytes[span]),
                })
            })
        };
        if let Err(e) = self.emit(pos, h, bytes, &recs) {
            self.write_error = Some(e);
            return;
        }
        match framing {
            Ok(()) => {
                self.totals.batches += 1;
                self.totals.records += h.records_count as u64;
                self.totals.bytes += h.size as u64;
                self.expected = h.last_offset() + 1;
                self.totals.next_offset = self.expected;
            }
            Err(e) => self.stop = Some((pos, e.to_string())),
        }
    }

    fn emit(&mut self, pos: u64, h: &BatchHeader, bytes: &[u8], recs: &[Rec]) -> io::Result<()> {
        let info = BatchInfo::read(bytes);
        let control = h.attributes & 0x20 != 0;
        if self.verify {
            if !control && self.kind != LogKind::Data {
                for r in recs {
                    let problem = match self.kind {
                        LogKind::Transactions => undecodable_txn(r),
                        _ => undecodable(r),
                    };
                    if let Some(problem) = problem {
                        writeln!(
                            self.out,
                            "WARNING: record at offset {} (byte offset {pos} of {}) does not decode, the broker skips it: {problem}",
                            r.offset,
                            self.file.display()
                        )?;
                    }
                }
            }
            return Ok(());
        }
        let log_append_time = h.attributes & 0x08 != 0;
        let ts_type = if log_append_time {
            "LogAppendTime"
        } else {
            "CreateTime"
        };
        let delete_horizon = if h.attributes & 0x40 != 0 {
            format!("OptionalLong[{}]", info.base_timestamp)
        } else {
            "OptionalLong.empty".into()
        };
        writeln!(
            self.out,
            "baseOffset: {} lastOffset: {} count: {} baseSequence: {} lastSequence: {} producerId: {} producerEpoch: {} partitionLeaderEpoch: {} isTransactional: {} isControl: {} deleteHorizonMs: {} position: {pos} {ts_type}: {} size: {} magic: 2 compresscodec: {} crc: {} isvalid: true",
            h.base_offset,
            h.last_offset(),
            h.records_count,
            info.base_sequence,
            increment_sequence(info.base_sequence, h.last_offset_delta),
            info.producer_id,
            info.producer_epoch,
            info.partition_leader_epoch,
            h.attributes & 0x10 != 0,
            control,
            delete_horizon,
            info.max_timestamp,
            h.size,
            codec_name(h.attributes),
            info.crc,
        )?;
        for r in recs {
            let ts = if log_append_time {
                info.max_timestamp
            } else {
                r.timestamp
            };
            let delta = (r.offset - h.base_offset).min(i32::MAX as u64) as i32;
            let mut line = format!(
                "| offset: {} {ts_type}: {ts} keySize: {} valueSize: {} sequence: {} headerKeys: [{}]",
                r.offset,
                r.key.as_ref().map_or(-1, |k| k.len() as i64),
                r.value.as_ref().map_or(-1, |v| v.len() as i64),
                increment_sequence(info.base_sequence, delta),
                r.header_keys.join(","),
            );
            if control {
                line.push_str(&control_record(r));
            } else if self.kind == LogKind::Data {
                if self.print_data {
                    let text = |b: &Option<Vec<u8>>| {
                        b.as_deref().map_or("null".to_string(), |b| {
                            String::from_utf8_lossy(b).into_owned()
                        })
                    };
                    line.push_str(" key: ");
                    line.push_str(&text(&r.key));
                    line.push_str(" payload: ");
                    line.push_str(&text(&r.value));
                }
            } else {
                let (key, payload) = if self.kind == LogKind::Transactions {
                    parse_txn_record(r.offset, r.key.as_deref(), r.value.as_deref())
                } else {
                    parse_record(r.offset, r.key.as_deref(), r.value.as_deref())
                };
                line.push_str(" key: ");
                line.push_str(&key);
                if let Some(p) = payload {
                    line.push_str(" payload: ");
                    line.push_str(&p);
                }
            }
            writeln!(self.out, "{line}")?;
        }
        Ok(())
    }
}

/// Why a record's key or value does not decode (None: it does, or its type is one Kafka knows
/// but this build does not decode, which Kafka's loader skips too).
fn undecodable(r: &Rec) -> Option<String> {
    let Some(key) = &r.key else {
        return Some("the record has no key".into());
    };
    let key = match RecordKey::decode(key) {
        Ok(k) => k,
        Err(RecordError::UnknownType(_)) => return None,
        Err(e) => return Some(format!("key: {e}")),
    };
    match &r.value {
        Some(v) => RecordValue::decode(key.record_type(), v)
            .err()
            .map(|e| format!("value: {e}")),
        None => None,
    }
}

/// Why a `__transaction_state` record does not decode (None: it does, or its key type is
/// unknown, which the coordinator's loader skips).
fn undecodable_txn(r: &Rec) -> Option<String> {
    let Some(key) = &r.key else {
        return Some("the record has no key".into());
    };
    match txn::decode_key(key) {
        Ok(_) => {}
        Err(RecordError::UnknownType(_)) => return None,
        Err(e) => return Some(format!("key: {e}")),
    }
    r.value
        .as_deref()
        .and_then(|v| txn::TransactionLogValue::decode(v).err())
        .map(|e| format!("value: {e}"))
}

/// The key and payload texts Kafka's `TransactionLogMessageParser` prints for one
/// `__transaction_state` record: `{"type":"0","data":{"transactionalId":..}}` and
/// `{"version":"V","data":{..}}` with `TransactionLogValueJsonConverter`'s fields (the tagged
/// ones of version 1 only when not at their default), `<DELETE>` for a tombstone; the same
/// texts as the offsets decoder for a record that does not decode.
pub fn parse_txn_record(
    offset: u64,
    key: Option<&[u8]>,
    value: Option<&[u8]>,
) -> (String, Option<String>) {
    let Some(key) = key else {
        return (
            format!("Failed to decode message at offset {offset} using the specified decoder (message had a missing key)"),
            None,
        );
    };
    let id = match txn::decode_key(key) {
        Ok(id) => id,
        Err(RecordError::UnknownType(t)) => {
            return (
                format!("Unknown record type {t} at offset {offset}, skipping."),
                None,
            )
        }
        Err(e) => return (format!("Error at offset {offset}, skipping. {e}"), None),
    };
    let payload = match value {
        None => "<DELETE>".to_string(),
        Some(v) => match txn::TransactionLogValue::decode(v) {
            // decode checked the version prefix
            Ok(value) => to_json(&txn_value_envelope(
                i16::from_be_bytes([v[0], v[1]]),
                &value,
            )),
            Err(e) => return (format!("Error at offset {offset}, skipping. {e}"), None),
        },
    };
    let key = Json::Obj(vec![
        ("type", Json::Str(txn::TRANSACTION_LOG.to_string())),
        ("data", Json::Obj(vec![("transactionalId", s(&id))])),
    ]);
    (to_json(&key), Some(payload))
}

/// `{"version":"V","data":{..}}` of a `TransactionLogValue`, fields in the schema's order
/// (`TransactionLogValue.json`): the tagged PreviousProducerId, NextProducerId (after
/// ProducerId) and ClientTransactionVersion (last) appear at version 1+ when not their default.
fn txn_value_envelope(version: i16, v: &txn::TransactionLogValue) -> Json {
    let tagged = version >= 1;
    let mut o = vec![("producerId", int(v.producer_id))];
    if tagged && v.previous_producer_id != -1 {
        o.push(("previousProducerId", int(v.previous_producer_id)));
    }
    if tagged && v.next_producer_id != -1 {
        o.push(("nextProducerId", int(v.next_producer_id)));
    }
    o.push(("producerEpoch", int(v.producer_epoch)));
    o.push(("transactionTimeoutMs", int(v.transaction_timeout_ms)));
    // Kafka's decoder names the state (`TransactionState.fromId(..).stateName()`).
    o.push((
        "transactionStatus",
        match txn_state_name(v.transaction_status) {
            Some(name) => s(name),
            None => int(v.transaction_status),
        },
    ));
    o.push((
        "transactionPartitions",
        match &v.transaction_partitions {
            None => Json::Null,
            Some(topics) => Json::Arr(
                topics
                    .iter()
                    .map(|t| {
                        Json::Obj(vec![
                            ("topic", s(&t.topic)),
                            ("partitionIds", ints(&t.partition_ids)),
                        ])
                    })
                    .collect(),
            ),
        },
    ));
    o.push((
        "transactionLastUpdateTimestampMs",
        int(v.transaction_last_update_timestamp_ms),
    ));
    o.push((
        "transactionStartTimestampMs",
        int(v.transaction_start_timestamp_ms),
    ));
    if tagged && v.client_transaction_version != 0 {
        o.push((
            "clientTransactionVersion",
            int(v.client_transaction_version),
        ));
    }
    Json::Obj(vec![
        ("version", Json::Str(version.to_string())),
        ("data", Json::Obj(o)),
    ])
}

/// The name Kafka prints for a `TransactionStatus` id (`TransactionState.java`).
fn txn_state_name(status: i8) -> Option<&'static str> {
    Some(match status {
        txn::status::EMPTY => "Empty",
        txn::status::ONGOING => "Ongoing",
        txn::status::PREPARE_COMMIT => "PrepareCommit",
        txn::status::PREPARE_ABORT => "PrepareAbort",
        txn::status::COMPLETE_COMMIT => "CompleteCommit",
        txn::status::COMPLETE_ABORT => "CompleteAbort",
        txn::status::DEAD => "Dead",
        txn::status::PREPARE_EPOCH_FENCE => "PrepareEpochFence",
        _ => return None,
    })
}

/// ` endTxnMarker: COMMIT coordinatorEpoch: N` for a transaction marker (Kafka's
/// `printControlRecord`), the message as JSON for a KRaft leader change or voters record (what
/// a cluster node's Raft logs hold, `storage::raft_log`), ` controlType: NAME(id)` for other
/// control records and for those whose value does not parse.
fn control_record(r: &Rec) -> String {
    let key = r.key.as_deref().unwrap_or_default();
    if key.len() < 4 {
        return " controlType: UNKNOWN(-1)".into();
    }
    let id = i16::from_be_bytes([key[2], key[3]]);
    let name = match id {
        0 => "ABORT",
        1 => "COMMIT",
        2 => "LEADER_CHANGE",
        3 => "SNAPSHOT_HEADER",
        4 => "SNAPSHOT_FOOTER",
        5 => "KRAFT_VERSION",
        6 => "KRAFT_VOTERS",
        _ => "UNKNOWN",
    };
    let value = r.value.as_deref().unwrap_or_default();
    let json = |j: Json| serde_json::to_string(&j).expect("JSON always serialises");
    match id {
        0 | 1 if value.len() >= 6 => {
            let epoch = i32::from_be_bytes(value[2..6].try_into().expect("4 bytes"));
            format!(" endTxnMarker: {name} coordinatorEpoch: {epoch}")
        }
        2 => match leader_change_json(value) {
            Some(j) => format!(" LeaderChange: {}", json(j)),
            None => format!(" controlType: {name}({id})"),
        },
        // Kafka prints this one without a colon.
        6 => match voters_json(value) {
            Some(j) => format!(" KRaftVoters {}", json(j)),
            None => format!(" controlType: {name}({id})"),
        },
        _ => format!(" controlType: {name}({id})"),
    }
}

/// `LeaderChangeMessage` v0 as Kafka's `LeaderChangeMessageJsonConverter` prints it.
fn leader_change_json(value: &[u8]) -> Option<Json> {
    let (leader, voters, granting) = storage::batch::parse_leader_change(value).ok()?;
    let ids = |ids: Vec<i32>| {
        let voter = |id: i32| Json::Obj(vec![("voterId", Json::Int(id.into()))]);
        Json::Arr(ids.into_iter().map(voter).collect())
    };
    Some(Json::Obj(vec![
        ("version", Json::Int(0)),
        ("leaderId", Json::Int(leader.into())),
        ("voters", ids(voters)),
        ("grantingVoters", ids(granting)),
    ]))
}

/// `VotersRecord` v0 as Kafka's `VotersRecordJsonConverter` prints it (our change's tagged
/// field, like any unknown tag, is not printed).
fn voters_json(value: &[u8]) -> Option<Json> {
    let record = storage::batch::parse_voters_record(value).ok()?;
    let voter = |v: storage::batch::RecordVoter| {
        let endpoint = |(name, host, port): (String, String, u16)| {
            Json::Obj(vec![
                ("name", s(&name)),
                ("host", s(&host)),
                ("port", Json::Int(port.into())),
            ])
        };
        Json::Obj(vec![
            ("voterId", Json::Int(v.id.into())),
            (
                "voterDirectoryId",
                uuid(&uuid::Uuid::from_bytes(v.directory_id)),
            ),
            (
                "endpoints",
                Json::Arr(v.endpoints.into_iter().map(endpoint).collect()),
            ),
            (
                "kRaftVersionFeature",
                Json::Obj(vec![
                    ("minSupportedVersion", Json::Int(v.kraft_versions.0.into())),
                    ("maxSupportedVersion", Json::Int(v.kraft_versions.1.into())),
                ]),
            ),
        ])
    };
    Some(Json::Obj(vec![
        ("version", Json::Int(0)),
        (
            "voters",
            Json::Arr(record.voters.into_iter().map(voter).collect()),
        ),
    ]))
}

/// The key and payload texts Kafka's `OffsetsMessageParser` prints for one record.
pub fn parse_record(
    offset: u64,
    key: Option<&[u8]>,
    value: Option<&[u8]>,
) -> (String, Option<String>) {
    let Some(key) = key else {
        return (
            format!("Failed to decode message at offset {offset} using the specified decoder (message had a missing key)"),
            None,
        );
    };
    let key = match RecordKey::decode(key) {
        Ok(k) => k,
        Err(RecordError::UnknownType(t)) => {
            return (
                format!("Unknown record type {t} at offset {offset}, skipping."),
                None,
            )
        }
        Err(e) => return (format!("Error at offset {offset}, skipping. {e}"), None),
    };
    let payload = match value {
        None => "<DELETE>".to_string(),
        Some(v) => match RecordValue::decode_with_version(key.record_type(), v) {
            Ok((version, value)) => to_json(&value_envelope(version, &value)),
            Err(e) => return (format!("Error at offset {offset}, skipping. {e}"), None),
        },
    };
    (to_json(&key_envelope(&key)), Some(payload))
}

// ---------------------------------------------------------------------------------------------
// JSON, in Kafka's field order (serde_json's own map sorts keys, so objects keep a Vec).
// ---------------------------------------------------------------------------------------------

/// A JSON value whose objects keep their fields in the order given.
#[derive(Debug, Clone, PartialEq)]
pub enum Json {
    Null,
    Int(i64),
    Str(String),
    Arr(Vec<Json>),
    Obj(Vec<(&'static str, Json)>),
}

impl Serialize for Json {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            Json::Null => s.serialize_unit(),
            Json::Int(v) => s.serialize_i64(*v),
            Json::Str(v) => s.serialize_str(v),
            Json::Arr(items) => {
                let mut seq = s.serialize_seq(Some(items.len()))?;
                for item in items {
                    seq.serialize_element(item)?;
                }
                seq.end()
            }
            Json::Obj(fields) => {
                let mut map = s.serialize_map(Some(fields.len()))?;
                for (k, v) in fields {
                    map.serialize_entry(k, v)?;
                }
                map.end()
            }
        }
    }
}

fn to_json(j: &Json) -> String {
    serde_json::to_string(j).expect("serializing an in-memory JSON tree cannot fail")
}

fn s(v: &str) -> Json {
    Json::Str(v.to_string())
}

fn opt_s(v: Option<&str>) -> Json {
    v.map_or(Json::Null, s)
}

fn int(v: impl Into<i64>) -> Json {
    Json::Int(v.into())
}

fn ints(v: &[i32]) -> Json {
    Json::Arr(v.iter().map(|x| int(*x)).collect())
}

fn strs(v: &[String]) -> Json {
    Json::Arr(v.iter().map(|x| s(x)).collect())
}

/// Bytes as Jackson writes a `BinaryNode`: standard base64 with padding.
fn bytes(v: &[u8]) -> Json {
    Json::Str(base64(v, BASE64_STD, true))
}

/// Kafka's `Uuid.toString()`: URL-safe base64 without padding (22 characters).
fn uuid(v: &uuid::Uuid) -> Json {
    Json::Str(base64(v.as_bytes(), BASE64_URL, false))
}

const BASE64_STD: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
const BASE64_URL: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";

fn base64(data: &[u8], alphabet: &[u8; 64], pad: bool) -> String {
    let mut out = String::with_capacity(data.len().div_ceil(3) * 4);
    for chunk in data.chunks(3) {
        let n = chunk.len();
        let b = [
            chunk[0],
            *chunk.get(1).unwrap_or(&0),
            *chunk.get(2).unwrap_or(&0),
        ];
        let v = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        for i in 0..4 {
            if i <= n {
                out.push(alphabet[(v >> (18 - 6 * i) & 0x3f) as usize] as char);
            } else if pad {
                out.push('=');
            }
        }
    }
    out
}

/// `{"type":"N","data":{..}}` (Kafka's `prepareKey`).
pub fn key_envelope(key: &RecordKey) -> Json {
    Json::Obj(vec![
        ("type", Json::Str(key.record_type().to_string())),
        ("data", key_json(key)),
    ])
}

/// `{"version":"V","data":{..}}` (Kafka's `prepareValue`).
pub fn value_envelope(version: i16, value: &RecordValue) -> Json {
    Json::Obj(vec![
        ("version", Json::Str(version.to_string())),
        ("data", value_json(version, value)),
    ])
}

/// A key as its generated `*KeyJsonConverter` writes it.
pub fn key_json(key: &RecordKey) -> Json {
    match key {
        RecordKey::LegacyOffsetCommit {
            group,
            topic,
            partition,
        }
        | RecordKey::OffsetCommit {
            group,
            topic,
            partition,
        } => Json::Obj(vec![
            ("group", s(group)),
            ("topic", s(topic)),
            ("partition", int(*partition)),
        ]),
        RecordKey::GroupMetadata { group } => Json::Obj(vec![("group", s(group))]),
        RecordKey::ConsumerGroupMetadata { group }
        | RecordKey::ConsumerGroupPartitionMetadata { group }
        | RecordKey::ConsumerGroupTargetAssignmentMetadata { group } => {
            Json::Obj(vec![("groupId", s(group))])
        }
        RecordKey::ConsumerGroupMemberMetadata { group, member_id }
        | RecordKey::ConsumerGroupTargetAssignmentMember { group, member_id }
        | RecordKey::ConsumerGroupCurrentMemberAssignment { group, member_id } => {
            Json::Obj(vec![("groupId", s(group)), ("memberId", s(member_id))])
        }
        RecordKey::ConsumerGroupRegularExpression { group, regex } => {
            Json::Obj(vec![("groupId", s(group)), ("regularExpression", s(regex))])
        }
    }
}

/// A value at `version` as its generated `*ValueJsonConverter` writes it (plus, for a classic
/// `consumer` group, decoded subscriptions and assignments, as `DumpLogSegments` does).
pub fn value_json(version: i16, value: &RecordValue) -> Json {
    match value {
        RecordValue::LegacyOffsetCommit(v) => Json::Obj(vec![
            ("offset", int(v.offset)),
            ("metadata", s(&v.metadata)),
            ("commitTimestamp", int(v.commit_timestamp)),
        ]),
        RecordValue::OffsetCommit(v) => {
            let mut o = vec![("offset", int(v.offset))];
            if version >= 3 {
                o.push(("leaderEpoch", int(v.leader_epoch)));
            }
            o.push(("metadata", s(&v.metadata)));
            o.push(("commitTimestamp", int(v.commit_timestamp)));
            if version == 1 {
                o.push(("expireTimestamp", int(v.expire_timestamp)));
            }
            if version >= 4 && !v.topic_id.is_nil() {
                o.push(("topicId", uuid(&v.topic_id)));
            }
            Json::Obj(o)
        }
        RecordValue::GroupMetadata(v) => group_metadata_json(version, v),
        RecordValue::ConsumerGroupMetadata(v) => {
            let mut o = vec![("epoch", int(v.epoch))];
            if v.metadata_hash != 0 {
                o.push(("metadataHash", int(v.metadata_hash)));
            }
            Json::Obj(o)
        }
        RecordValue::ConsumerGroupPartitionMetadata(v) => Json::Obj(vec![(
            "topics",
            Json::Arr(
                v.topics
                    .iter()
                    .map(|t| {
                        Json::Obj(vec![
                            ("topicId", uuid(&t.topic_id)),
                            ("topicName", s(&t.topic_name)),
                            ("numPartitions", int(t.num_partitions)),
                            (
                                "partitionMetadata",
                                Json::Arr(
                                    t.partition_metadata
                                        .iter()
                                        .map(|p| {
                                            Json::Obj(vec![
                                                ("partition", int(p.partition)),
                                                ("racks", strs(&p.racks)),
                                            ])
                                        })
                                        .collect(),
                                ),
                            ),
                        ])
                    })
                    .collect(),
            ),
        )]),
        RecordValue::ConsumerGroupMemberMetadata(v) => {
            let mut o = vec![
                ("instanceId", opt_s(v.instance_id.as_deref())),
                ("rackId", opt_s(v.rack_id.as_deref())),
                ("clientId", s(&v.client_id)),
                ("clientHost", s(&v.client_host)),
                ("subscribedTopicNames", strs(&v.subscribed_topic_names)),
                (
                    "subscribedTopicRegex",
                    opt_s(v.subscribed_topic_regex.as_deref()),
                ),
                ("rebalanceTimeoutMs", int(v.rebalance_timeout_ms)),
                ("serverAssignor", opt_s(v.server_assignor.as_deref())),
            ];
            // Kafka's converter prints a null one as null (its default is an empty struct).
            if let Some(c) = &v.classic_member_metadata {
                o.push((
                    "classicMemberMetadata",
                    Json::Obj(vec![
                        ("sessionTimeoutMs", int(c.session_timeout_ms)),
                        (
                            "supportedProtocols",
                            Json::Arr(
                                c.supported_protocols
                                    .iter()
                                    .map(|p| {
                                        Json::Obj(vec![
                                            ("name", s(&p.name)),
                                            ("metadata", bytes(&p.metadata)),
                                        ])
                                    })
                                    .collect(),
                            ),
                        ),
                    ]),
                ));
            } else {
                o.push(("classicMemberMetadata", Json::Null));
            }
            Json::Obj(o)
        }
        RecordValue::ConsumerGroupTargetAssignmentMetadata(v) => {
            let mut o = vec![("assignmentEpoch", int(v.assignment_epoch))];
            if v.assignment_timestamp != 0 {
                o.push(("assignmentTimestamp", int(v.assignment_timestamp)));
            }
            Json::Obj(o)
        }
        RecordValue::ConsumerGroupTargetAssignmentMember(v) => Json::Obj(vec![(
            "topicPartitions",
            Json::Arr(
                v.topic_partitions
                    .iter()
                    .map(|tp| {
                        Json::Obj(vec![
                            ("topicId", uuid(&tp.topic_id)),
                            ("partitions", ints(&tp.partitions)),
                        ])
                    })
                    .collect(),
            ),
        )]),
        RecordValue::ConsumerGroupCurrentMemberAssignment(v) => current_assignment_json(v),
        RecordValue::ConsumerGroupRegularExpression(v) => Json::Obj(vec![
            ("topics", strs(&v.topics)),
            ("version", int(v.version)),
            ("timestamp", int(v.timestamp)),
        ]),
    }
}

fn current_assignment_json(v: &ConsumerGroupCurrentMemberAssignmentValue) -> Json {
    let tps = |list: &[CurrentTopicPartitions]| {
        Json::Arr(
            list.iter()
                .map(|tp| {
                    let mut o = vec![
                        ("topicId", uuid(&tp.topic_id)),
                        ("partitions", ints(&tp.partitions)),
                    ];
                    if let Some(e) = &tp.assignment_epochs {
                        o.push(("assignmentEpochs", ints(e)));
                    }
                    Json::Obj(o)
                })
                .collect(),
        )
    };
    Json::Obj(vec![
        ("memberEpoch", int(v.member_epoch)),
        ("previousMemberEpoch", int(v.previous_member_epoch)),
        ("state", int(v.state)),
        ("assignedPartitions", tps(&v.assigned_partitions)),
        (
            "partitionsPendingRevocation",
            tps(&v.partitions_pending_revocation),
        ),
    ])
}

fn group_metadata_json(version: i16, v: &GroupMetadataValue) -> Json {
    let consumer = v.protocol_type == "consumer";
    let mut o = vec![
        ("protocolType", s(&v.protocol_type)),
        ("generation", int(v.generation)),
        ("protocol", opt_s(v.protocol.as_deref())),
        ("leader", opt_s(v.leader.as_deref())),
    ];
    if version >= 2 {
        o.push(("currentStateTimestamp", int(v.current_state_timestamp)));
    }
    let members = v
        .members
        .iter()
        .map(|m| {
            let mut mo = vec![("memberId", s(&m.member_id))];
            if version >= 3 {
                mo.push(("groupInstanceId", opt_s(m.group_instance_id.as_deref())));
            }
            mo.push(("clientId", s(&m.client_id)));
            mo.push(("clientHost", s(&m.client_host)));
            if version >= 1 {
                mo.push(("rebalanceTimeout", int(m.rebalance_timeout)));
            }
            mo.push(("sessionTimeout", int(m.session_timeout)));
            let sub = consumer
                .then(|| consumer_protocol::subscription(&m.subscription))
                .flatten();
            mo.push((
                "subscription",
                sub.unwrap_or_else(|| bytes(&m.subscription)),
            ));
            let asg = consumer
                .then(|| consumer_protocol::assignment(&m.assignment))
                .flatten();
            mo.push(("assignment", asg.unwrap_or_else(|| bytes(&m.assignment))));
            Json::Obj(mo)
        })
        .collect();
    o.push(("members", Json::Arr(members)));
    Json::Obj(o)
}

/// `ConsumerProtocolSubscription` / `ConsumerProtocolAssignment` (versions 0-3, never flexible:
/// int16 version prefix, int32 array counts, int16 string lengths, int32 bytes lengths) as their
/// JSON converters write them. Every length is checked against the bytes left; anything that
/// does not parse gives None and the caller keeps the base64 bytes, as Kafka does.
mod consumer_protocol {
    use super::{bytes, int, ints, opt_s, s, Json};

    struct R<'a> {
        b: &'a [u8],
        p: usize,
    }

    impl<'a> R<'a> {
        fn take(&mut self, n: usize) -> Option<&'a [u8]> {
            let end = self.p.checked_add(n)?;
            let s = self.b.get(self.p..end)?;
            self.p = end;
            Some(s)
        }
        fn i16(&mut self) -> Option<i16> {
            Some(i16::from_be_bytes(self.take(2)?.try_into().ok()?))
        }
        fn i32(&mut self) -> Option<i32> {
            Some(i32::from_be_bytes(self.take(4)?.try_into().ok()?))
        }
        fn nullable_string(&mut self) -> Option<Option<String>> {
            let n = self.i16()?;
            if n == -1 {
                return Some(None);
            }
            let raw = self.take(usize::try_from(n).ok()?)?;
            Some(Some(std::str::from_utf8(raw).ok()?.to_string()))
        }
        fn string(&mut self) -> Option<String> {
            self.nullable_string()?
        }
        fn nullable_bytes(&mut self) -> Option<Option<&'a [u8]>> {
            let n = self.i32()?;
            if n == -1 {
                return Some(None);
            }
            Some(Some(self.take(usize::try_from(n).ok()?)?))
        }
        /// An array count that the remaining bytes can back (each element >= `min` bytes).
        fn count(&mut self, min: usize) -> Option<usize> {
            let n = usize::try_from(self.i32()?).ok()?;
            (n.saturating_mul(min) <= self.b.len() - self.p).then_some(n)
        }
        fn array<T>(
            &mut self,
            min: usize,
            mut f: impl FnMut(&mut Self) -> Option<T>,
        ) -> Option<Vec<T>> {
            let n = self.count(min)?;
            (0..n).map(|_| f(self)).collect()
        }
    }

    fn topic_partitions(r: &mut R) -> Option<Json> {
        let topics = r.array(6, |r| {
            let topic = r.string()?;
            let partitions = r.array(4, R::i32)?;
            Some(Json::Obj(vec![
                ("topic", s(&topic)),
                ("partitions", ints(&partitions)),
            ]))
        })?;
        Some(Json::Arr(topics))
    }

    fn user_data(v: Option<&[u8]>) -> Json {
        v.map_or(Json::Null, bytes)
    }

    pub(super) fn subscription(b: &[u8]) -> Option<Json> {
        let mut r = R { b, p: 0 };
        let version = r.i16()?;
        if !(0..=3).contains(&version) {
            return None;
        }
        let topics = r.array(2, R::string)?;
        let mut o = vec![
            ("topics", Json::Arr(topics.iter().map(|t| s(t)).collect())),
            ("userData", user_data(r.nullable_bytes()?)),
        ];
        if version >= 1 {
            o.push(("ownedPartitions", topic_partitions(&mut r)?));
        }
        if version >= 2 {
            o.push(("generationId", int(r.i32()?)));
        }
        if version >= 3 {
            o.push(("rackId", opt_s(r.nullable_string()?.as_deref())));
        }
        Some(Json::Obj(o))
    }

    pub(super) fn assignment(b: &[u8]) -> Option<Json> {
        let mut r = R { b, p: 0 };
        let version = r.i16()?;
        if !(0..=3).contains(&version) {
            return None;
        }
        let assigned = topic_partitions(&mut r)?;
        let user = user_data(r.nullable_bytes()?);
        Some(Json::Obj(vec![
            ("assignedPartitions", assigned),
            ("userData", user),
        ]))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use storage::batch::encode_batch;
    use uuid::Uuid;
    use wire::records::*;

    fn j(v: &Json) -> String {
        to_json(v)
    }

    fn tid() -> Uuid {
        Uuid::from_bytes([
            0x1b, 0x4e, 0x28, 0xba, 0x2f, 0xa1, 0x11, 0xd2, 0x88, 0x3f, 0xb9, 0xa7, 0x61, 0xbd,
            0xe3, 0xfb,
        ])
    }

    #[test]
    fn base64_matches_java() {
        assert_eq!(base64(b"", BASE64_STD, true), "");
        assert_eq!(base64(b"f", BASE64_STD, true), "Zg==");
        assert_eq!(base64(b"fo", BASE64_STD, true), "Zm8=");
        assert_eq!(base64(b"foo", BASE64_STD, true), "Zm9v");
        assert_eq!(base64(&[0xfb, 0xff], BASE64_STD, true), "+/8=");
        assert_eq!(base64(&[0xfb, 0xff], BASE64_URL, false), "-_8");
        // Uuid.toString() of 1b4e28ba-2fa1-11d2-883f-b9a761bde3fb.
        assert_eq!(j(&uuid(&tid())), "\"G04oui-hEdKIP7mnYb3j-w\"");
    }

    #[test]
    fn offset_commit_key_and_values_at_each_version() {
        let key = RecordKey::OffsetCommit {
            group: "g".into(),
            topic: "orders".into(),
            partition: 0,
        };
        assert_eq!(
            j(&key_envelope(&key)),
            r#"{"type":"1","data":{"group":"g","topic":"orders","partition":0}}"#
        );
        let v = RecordValue::OffsetCommit(OffsetCommitValue {
            offset: 10,
            leader_epoch: 3,
            metadata: "m\"x".into(),
            commit_timestamp: 1_700_000_000_000,
            expire_timestamp: -1,
            topic_id: Uuid::nil(),
        });
        assert_eq!(
            j(&value_envelope(4, &v)),
            r#"{"version":"4","data":{"offset":10,"leaderEpoch":3,"metadata":"m\"x","commitTimestamp":1700000000000}}"#
        );
        assert_eq!(
            j(&value_json(0, &v)),
            r#"{"offset":10,"metadata":"m\"x","commitTimestamp":1700000000000}"#
        );
        let RecordValue::OffsetCommit(mut with_expiry) = v.clone() else {
            unreachable!()
        };
        with_expiry.expire_timestamp = 99;
        assert_eq!(
            j(&value_json(1, &RecordValue::OffsetCommit(with_expiry))),
            r#"{"offset":10,"metadata":"m\"x","commitTimestamp":1700000000000,"expireTimestamp":99}"#
        );
        let RecordValue::OffsetCommit(mut with_id) = v else {
            unreachable!()
        };
        with_id.topic_id = tid();
        assert_eq!(
            j(&value_json(4, &RecordValue::OffsetCommit(with_id))),
            r#"{"offset":10,"leaderEpoch":3,"metadata":"m\"x","commitTimestamp":1700000000000,"topicId":"G04oui-hEdKIP7mnYb3j-w"}"#
        );
        let legacy = RecordKey::LegacyOffsetCommit {
            group: "g".into(),
            topic: "t".into(),
            partition: 2,
        };
        assert_eq!(
            j(&key_envelope(&legacy)),
            r#"{"type":"0","data":{"group":"g","topic":"t","partition":2}}"#
        );
        assert_eq!(
            j(&value_json(
                0,
                &RecordValue::LegacyOffsetCommit(LegacyOffsetCommitValue {
                    offset: 5,
                    metadata: String::new(),
                    commit_timestamp: 7
                })
            )),
            r#"{"offset":5,"metadata":"","commitTimestamp":7}"#
        );
    }

    fn subscription_v1(topics: &[&str]) -> Vec<u8> {
        let mut b = 1i16.to_be_bytes().to_vec();
        b.extend_from_slice(&(topics.len() as i32).to_be_bytes());
        for t in topics {
            b.extend_from_slice(&(t.len() as i16).to_be_bytes());
            b.extend_from_slice(t.as_bytes());
        }
        b.extend_from_slice(&(-1i32).to_be_bytes()); // user data null
        b.extend_from_slice(&0i32.to_be_bytes()); // no owned partitions
        b
    }

    fn assignment_v0(topic: &str, partitions: &[i32]) -> Vec<u8> {
        let mut b = 0i16.to_be_bytes().to_vec();
        b.extend_from_slice(&1i32.to_be_bytes());
        b.extend_from_slice(&(topic.len() as i16).to_be_bytes());
        b.extend_from_slice(topic.as_bytes());
        b.extend_from_slice(&(partitions.len() as i32).to_be_bytes());
        for p in partitions {
            b.extend_from_slice(&p.to_be_bytes());
        }
        b.extend_from_slice(&2i32.to_be_bytes()); // user data, 2 bytes
        b.extend_from_slice(&[0xfb, 0xff]);
        b
    }

    #[test]
    fn group_metadata_consumer_protocol_is_decoded_other_bytes_stay_base64() {
        let key = RecordKey::GroupMetadata { group: "g".into() };
        assert_eq!(
            j(&key_envelope(&key)),
            r#"{"type":"2","data":{"group":"g"}}"#
        );
        let member = GroupMetadataMember {
            member_id: "m-1".into(),
            group_instance_id: None,
            client_id: "c".into(),
            client_host: "/127.0.0.1".into(),
            rebalance_timeout: 300000,
            session_timeout: 45000,
            subscription: subscription_v1(&["orders"]),
            assignment: assignment_v0("orders", &[0, 1, 2]),
        };
        let mut v = GroupMetadataValue {
            protocol_type: "consumer".into(),
            generation: 1,
            protocol: Some("range".into()),
            leader: Some("m-1".into()),
            current_state_timestamp: 1_700_000_000_000,
            members: vec![member.clone()],
        };
        assert_eq!(
            j(&value_envelope(3, &RecordValue::GroupMetadata(v.clone()))),
            concat!(
                r#"{"version":"3","data":{"protocolType":"consumer","generation":1,"protocol":"range","leader":"m-1","#,
                r#""currentStateTimestamp":1700000000000,"members":[{"memberId":"m-1","groupInstanceId":null,"#,
                r#""clientId":"c","clientHost":"/127.0.0.1","rebalanceTimeout":300000,"sessionTimeout":45000,"#,
                r#""subscription":{"topics":["orders"],"userData":null,"ownedPartitions":[]},"#,
                r#""assignment":{"assignedPartitions":[{"topic":"orders","partitions":[0,1,2]}],"userData":"+/8="}}]}}"#
            )
        );
        // Version 0: no currentStateTimestamp, groupInstanceId or rebalanceTimeout.
        assert_eq!(
            j(&value_json(0, &RecordValue::GroupMetadata(v.clone()))),
            concat!(
                r#"{"protocolType":"consumer","generation":1,"protocol":"range","leader":"m-1","members":[{"memberId":"m-1","#,
                r#""clientId":"c","clientHost":"/127.0.0.1","sessionTimeout":45000,"#,
                r#""subscription":{"topics":["orders"],"userData":null,"ownedPartitions":[]},"#,
                r#""assignment":{"assignedPartitions":[{"topic":"orders","partitions":[0,1,2]}],"userData":"+/8="}}]}"#
            )
        );
        // Another protocol type: bytes as base64. A consumer group with undecodable bytes too.
        v.protocol_type = "connect".into();
        v.members[0].subscription = b"foo".to_vec();
        v.members[0].assignment = vec![];
        let text = j(&value_json(3, &RecordValue::GroupMetadata(v.clone())));
        assert!(
            text.contains(r#""subscription":"Zm9v","assignment":"""#),
            "{text}"
        );
        v.protocol_type = "consumer".into();
        v.members[0].subscription = vec![0, 0, 0x7f, 0xff, 0xff, 0xff]; // lying topic count
        let text = j(&value_json(3, &RecordValue::GroupMetadata(v)));
        assert!(
            text.contains(r#""subscription":"AAB/////","assignment":"""#),
            "{text}"
        );
        // The empty group Kafka writes first.
        let empty = GroupMetadataValue {
            protocol_type: String::new(),
            generation: 0,
            protocol: None,
            leader: None,
            current_state_timestamp: 5,
            members: vec![],
        };
        assert_eq!(
            j(&value_json(3, &RecordValue::GroupMetadata(empty))),
            r#"{"protocolType":"","generation":0,"protocol":null,"leader":null,"currentStateTimestamp":5,"members":[]}"#
        );
    }

    #[test]
    fn consumer_group_records() {
        let g = || "cg".to_string();
        let m = || "mem".to_string();
        let cases: Vec<(RecordKey, RecordValue, &str, &str)> = vec![
            (
                RecordKey::ConsumerGroupMetadata { group: g() },
                RecordValue::ConsumerGroupMetadata(ConsumerGroupMetadataValue {
                    epoch: 3,
                    metadata_hash: 0,
                }),
                r#"{"type":"3","data":{"groupId":"cg"}}"#,
                r#"{"version":"0","data":{"epoch":3}}"#,
            ),
            (
                RecordKey::ConsumerGroupMetadata { group: g() },
                RecordValue::ConsumerGroupMetadata(ConsumerGroupMetadataValue {
                    epoch: 4,
                    metadata_hash: -7,
                }),
                r#"{"type":"3","data":{"groupId":"cg"}}"#,
                r#"{"version":"0","data":{"epoch":4,"metadataHash":-7}}"#,
            ),
            (
                RecordKey::ConsumerGroupPartitionMetadata { group: g() },
                RecordValue::ConsumerGroupPartitionMetadata(ConsumerGroupPartitionMetadataValue {
                    topics: vec![TopicMetadata {
                        topic_id: tid(),
                        topic_name: "orders".into(),
                        num_partitions: 6,
                        partition_metadata: vec![PartitionMetadata {
                            partition: 0,
                            racks: vec!["r1".into()],
                        }],
                    }],
                }),
                r#"{"type":"4","data":{"groupId":"cg"}}"#,
                r#"{"version":"0","data":{"topics":[{"topicId":"G04oui-hEdKIP7mnYb3j-w","topicName":"orders","numPartitions":6,"partitionMetadata":[{"partition":0,"racks":["r1"]}]}]}}"#,
            ),
            (
                RecordKey::ConsumerGroupMemberMetadata {
                    group: g(),
                    member_id: m(),
                },
                RecordValue::ConsumerGroupMemberMetadata(ConsumerGroupMemberMetadataValue {
                    instance_id: None,
                    rack_id: Some("r1".into()),
                    client_id: "c".into(),
                    client_host: "/127.0.0.1".into(),
                    subscribed_topic_names: vec!["orders".into()],
                    subscribed_topic_regex: None,
                    rebalance_timeout_ms: 300000,
                    server_assignor: Some("uniform".into()),
                    classic_member_metadata: Some(ClassicMemberMetadata {
                        session_timeout_ms: 45000,
                        supported_protocols: vec![ClassicProtocol {
                            name: "range".into(),
                            metadata: b"foo".to_vec(),
                        }],
                    }),
                }),
                r#"{"type":"5","data":{"groupId":"cg","memberId":"mem"}}"#,
                r#"{"version":"0","data":{"instanceId":null,"rackId":"r1","clientId":"c","clientHost":"/127.0.0.1","subscribedTopicNames":["orders"],"subscribedTopicRegex":null,"rebalanceTimeoutMs":300000,"serverAssignor":"uniform","classicMemberMetadata":{"sessionTimeoutMs":45000,"supportedProtocols":[{"name":"range","metadata":"Zm9v"}]}}}"#,
            ),
            (
                RecordKey::ConsumerGroupTargetAssignmentMetadata { group: g() },
                RecordValue::ConsumerGroupTargetAssignmentMetadata(
                    ConsumerGroupTargetAssignmentMetadataValue {
                        assignment_epoch: 3,
                        assignment_timestamp: 0,
                    },
                ),
                r#"{"type":"6","data":{"groupId":"cg"}}"#,
                r#"{"version":"0","data":{"assignmentEpoch":3}}"#,
            ),
            (
                RecordKey::ConsumerGroupTargetAssignmentMember {
                    group: g(),
                    member_id: m(),
                },
                RecordValue::ConsumerGroupTargetAssignmentMember(
                    ConsumerGroupTargetAssignmentMemberValue {
                        topic_partitions: vec![TargetTopicPartitions {
                            topic_id: tid(),
                            partitions: vec![0, 1, 2],
                        }],
                    },
                ),
                r#"{"type":"7","data":{"groupId":"cg","memberId":"mem"}}"#,
                r#"{"version":"0","data":{"topicPartitions":[{"topicId":"G04oui-hEdKIP7mnYb3j-w","partitions":[0,1,2]}]}}"#,
            ),
            (
                RecordKey::ConsumerGroupCurrentMemberAssignment {
                    group: g(),
                    member_id: m(),
                },
                RecordValue::ConsumerGroupCurrentMemberAssignment(
                    ConsumerGroupCurrentMemberAssignmentValue {
                        member_epoch: 3,
                        previous_member_epoch: 2,
                        state: member_state::UNREVOKED_PARTITIONS,
                        assigned_partitions: vec![CurrentTopicPartitions {
                            topic_id: tid(),
                            partitions: vec![0, 1, 2],
                            assignment_epochs: None,
                        }],
                        partitions_pending_revocation: vec![CurrentTopicPartitions {
                            topic_id: tid(),
                            partitions: vec![3],
                            assignment_epochs: Some(vec![2]),
                        }],
                    },
                ),
                r#"{"type":"8","data":{"groupId":"cg","memberId":"mem"}}"#,
                r#"{"version":"0","data":{"memberEpoch":3,"previousMemberEpoch":2,"state":1,"assignedPartitions":[{"topicId":"G04oui-hEdKIP7mnYb3j-w","partitions":[0,1,2]}],"partitionsPendingRevocation":[{"topicId":"G04oui-hEdKIP7mnYb3j-w","partitions":[3],"assignmentEpochs":[2]}]}}"#,
            ),
            (
                RecordKey::ConsumerGroupRegularExpression {
                    group: g(),
                    regex: "ord.*".into(),
                },
                RecordValue::ConsumerGroupRegularExpression(ConsumerGroupRegularExpressionValue {
                    topics: vec!["orders".into()],
                    version: 12,
                    timestamp: 34,
                }),
                r#"{"type":"16","data":{"groupId":"cg","regularExpression":"ord.*"}}"#,
                r#"{"version":"0","data":{"topics":["orders"],"version":12,"timestamp":34}}"#,
            ),
        ];
        for (key, value, want_key, want_value) in cases {
            // Through the bytes, as the tool sees them.
            let record = Record::new(key, value);
            let k = record.encode_key().unwrap();
            let v = record.encode_value().unwrap().unwrap();
            let (got_key, got_value) = parse_record(0, Some(&k), Some(&v));
            assert_eq!(got_key, want_key);
            assert_eq!(got_value.as_deref(), Some(want_value));
        }
    }

    #[test]
    fn tombstones_unknown_types_and_garbage() {
        let key = RecordKey::ConsumerGroupMemberMetadata {
            group: "g".into(),
            member_id: "m".into(),
        }
        .to_bytes()
        .unwrap();
        assert_eq!(
            parse_record(4, Some(&key), None),
            (
                r#"{"type":"5","data":{"groupId":"g","memberId":"m"}}"#.to_string(),
                Some("<DELETE>".to_string())
            )
        );
        // Type 11 (a share group record): Kafka knows it, this build does not decode it.
        let mut share = 11i16.to_be_bytes().to_vec();
        share.extend_from_slice(&[0, 1, b'g']);
        assert_eq!(
            parse_record(9, Some(&share), Some(&[0, 0])),
            (
                "Unknown record type 11 at offset 9, skipping.".to_string(),
                None
            )
        );
        let (k, v) = parse_record(3, Some(&[0, 1, 0]), Some(&[0, 4]));
        assert!(k.starts_with("Error at offset 3, skipping. "), "{k}");
        assert_eq!(v, None);
        let (k, v) = parse_record(2, None, Some(&[0, 4]));
        assert!(k.contains("missing key"), "{k}");
        assert_eq!(v, None);
        let off = RecordKey::OffsetCommit {
            group: "g".into(),
            topic: "t".into(),
            partition: 0,
        }
        .to_bytes()
        .unwrap();
        let (k, v) = parse_record(1, Some(&off), Some(&[0, 9, 1, 2]));
        assert!(k.starts_with("Error at offset 1, skipping. "), "{k}");
        assert_eq!(v, None);
    }

    // ------------------------------------------------------------------ whole files

    struct Tmp(PathBuf);
    impl Drop for Tmp {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }
    fn tmpdir(tag: &str) -> Tmp {
        static N: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
        let n = N.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        // Named like a partition of the offsets topic, whose records are decoded as group records.
        let d = std::env::temp_dir().join(format!(
            "__consumer_offsets-{n}-rl-dump-{tag}-{}",
            std::process::id()
        ));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        Tmp(d)
    }

    #[test]
    fn a_topic_data_log_prints_keys_and_values_as_text() {
        let root = tmpdir("topic");
        let d = root.0.join("orders-0");
        std::fs::create_dir_all(&d).unwrap();
        let mut b = Vec::new();
        storage::batch::encode_batch(
            7,
            1_000,
            &[(Some(b"k1"), Some(b"hello")), (None, None)],
            &mut b,
        );
        std::fs::write(d.join("00000000000000000007.log"), &b).unwrap();
        let args = DumpLogArgs {
            path: d.clone(),
            verify: false,
            print_data_log: true,
            offsets_decoder: false,
            transaction_log_decoder: false,
        };
        let (mut out, mut err) = (Vec::new(), Vec::new());
        assert_eq!(run(&args, &mut out, &mut err), EXIT_OK);
        let out = String::from_utf8(out).unwrap();
        assert!(out.contains("| offset: 7 CreateTime: 1000 keySize: 2 valueSize: 5 sequence: 0 headerKeys: [] key: k1 payload: hello"), "{out}");
        assert!(out.contains("| offset: 8 CreateTime: 1000 keySize: -1 valueSize: -1 sequence: 1 headerKeys: [] key: null payload: null"), "{out}");
        let (code, out, _) = run_on(&d, true);
        assert_eq!(
            (code, out.trim()),
            (EXIT_OK, "OK: 1 batches, 2 records, 82 bytes")
        );
    }

    /// A `__transaction_state-<p>` directory's records are decoded as Kafka's
    /// `--transaction-log-decoder` prints them (the texts compared with Kafka's own output on
    /// both brokers' logs by the Java TxnLogDiffTest): both value versions, tagged fields only
    /// when set, null partitions while Empty, a tombstone, and a value that does not decode.
    #[test]
    fn a_transaction_state_log_prints_transaction_records() {
        use wire::records::txn::{status, TransactionLogValue, TxnTopicPartitions};
        let root = tmpdir("txn");
        let d = root.0.join("__transaction_state-7");
        std::fs::create_dir_all(&d).unwrap();
        let key = txn::encode_key("tx-1").unwrap();
        let empty = TransactionLogValue {
            producer_id: 4,
            producer_epoch: 0,
            transaction_timeout_ms: 60_000,
            transaction_last_update_timestamp_ms: 1_700_000_000_000,
            ..Default::default()
        };
        let ongoing = TransactionLogValue {
            previous_producer_id: 3,
            transaction_status: status::ONGOING,
            transaction_partitions: Some(vec![
                TxnTopicPartitions {
                    topic: "__consumer_offsets".into(),
                    partition_ids: vec![18],
                },
                TxnTopicPartitions {
                    topic: "t".into(),
                    partition_ids: vec![2, 0],
                },
            ]),
            transaction_start_timestamp_ms: 1_700_000_000_001,
            client_transaction_version: 2,
            ..empty.clone()
        };
        let v0 = empty.encode(0).unwrap();
        let v1 = ongoing.encode(1).unwrap();
        let mut b = Vec::new();
        encode_batch(
            0,
            1_000,
            &[
                (Some(&key), Some(&v0)),
                (Some(&key), Some(&v1)),
                (Some(&key), None),
            ],
            &mut b,
        );
        let garbage = [0u8, 1, 0];
        encode_batch(3, 1_000, &[(Some(&key), Some(&garbage))], &mut b);
        std::fs::write(d.join("00000000000000000000.log"), &b).unwrap();
        let (code, out, err) = run_on(&d, false);
        assert_eq!(code, EXIT_OK, "{err}");
        let records: Vec<&str> = out.lines().filter(|l| l.starts_with("| ")).collect();
        let k = r#"key: {"type":"0","data":{"transactionalId":"tx-1"}}"#;
        assert_eq!(
            records,
            vec![
                format!(r#"| offset: 0 CreateTime: 1000 keySize: 8 valueSize: {} sequence: 0 headerKeys: [] {k} payload: {{"version":"0","data":{{"producerId":4,"producerEpoch":0,"transactionTimeoutMs":60000,"transactionStatus":"Empty","transactionPartitions":null,"transactionLastUpdateTimestampMs":1700000000000,"transactionStartTimestampMs":-1}}}}"#, v0.len()),
                format!(r#"| offset: 1 CreateTime: 1000 keySize: 8 valueSize: {} sequence: 1 headerKeys: [] {k} payload: {{"version":"1","data":{{"producerId":4,"previousProducerId":3,"producerEpoch":0,"transactionTimeoutMs":60000,"transactionStatus":"Ongoing","transactionPartitions":[{{"topic":"__consumer_offsets","partitionIds":[18]}},{{"topic":"t","partitionIds":[2,0]}}],"transactionLastUpdateTimestampMs":1700000000000,"transactionStartTimestampMs":1700000000001,"clientTransactionVersion":2}}}}"#, v1.len()),
                format!("| offset: 2 CreateTime: 1000 keySize: 8 valueSize: -1 sequence: 2 headerKeys: [] {k} payload: <DELETE>"),
                "| offset: 3 CreateTime: 1000 keySize: 8 valueSize: 3 sequence: 0 headerKeys: [] key: Error at offset 3, skipping. ".to_string()
                    + &txn::TransactionLogValue::decode(&garbage).unwrap_err().to_string(),
            ]
        );
        // --verify names the record the coordinator's load skips.
        let (code, out, _) = run_on(&d, true);
        assert_eq!(code, EXIT_OK);
        assert!(
            out.contains("WARNING: record at offset 3") && out.contains("value: "),
            "{out}"
        );
        // The flag decodes a file outside such a directory the same way.
        let other = root.0.join("copy.log");
        std::fs::copy(d.join("00000000000000000000.log"), &other).unwrap();
        let args = DumpLogArgs {
            path: other,
            verify: false,
            print_data_log: false,
            offsets_decoder: false,
            transaction_log_decoder: true,
        };
        let (mut o, mut e) = (Vec::new(), Vec::new());
        assert_eq!(run(&args, &mut o, &mut e), EXIT_OK);
        let o = String::from_utf8(o).unwrap();
        assert_eq!(
            o.lines()
                .filter(|l| l.starts_with("| "))
                .collect::<Vec<_>>(),
            records
        );
    }

    fn commit(group: &str, partition: i32, offset: i64) -> (Vec<u8>, Option<Vec<u8>>) {
        let r = Record::new(
            RecordKey::OffsetCommit {
                group: group.into(),
                topic: "orders".into(),
                partition,
            },
            RecordValue::OffsetCommit(OffsetCommitValue {
                offset,
                commit_timestamp: 1_700_000_000_000,
                ..Default::default()
            }),
        );
        (r.encode_key().unwrap(), r.encode_value().unwrap())
    }

    type KeyValue<'a> = (Option<&'a [u8]>, Option<&'a [u8]>);

    /// Segment bytes of `batches` batches of `per` offset commits each, from offset `base`.
    fn segment(base: u64, batches: u64, per: u64) -> (Vec<u8>, Vec<usize>) {
        let mut out = Vec::new();
        let mut starts = Vec::new();
        for b in 0..batches {
            starts.push(out.len());
            let recs: Vec<_> = (0..per)
                .map(|i| commit("g", i as i32, (b * 100 + i) as i64))
                .collect();
            let refs: Vec<KeyValue> = recs
                .iter()
                .map(|(k, v)| (Some(k.as_slice()), v.as_deref()))
                .collect();
            encode_batch(base + b * per, 1_700_000_000_000, &refs, &mut out);
        }
        (out, starts)
    }

    fn run_on(path: &Path, verify: bool) -> (i32, String, String) {
        let args = DumpLogArgs {
            path: path.to_path_buf(),
            verify,
            print_data_log: false,
            offsets_decoder: false,
            transaction_log_decoder: false,
        };
        let (mut out, mut err) = (Vec::new(), Vec::new());
        let code = run(&args, &mut out, &mut err);
        (
            code,
            String::from_utf8(out).unwrap(),
            String::from_utf8(err).unwrap(),
        )
    }

    #[test]
    fn dump_prints_batches_and_records_like_kafka() {
        let d = tmpdir("dump");
        let (mut bytes, _) = segment(0, 1, 2);
        // A tombstone batch after it.
        let (k, _) = commit("g", 0, 0);
        let first = bytes.len();
        encode_batch(2, 1_700_000_000_001, &[(Some(&k), None)], &mut bytes);
        let file = d.0.join(storage::log::segment_name(0));
        std::fs::write(&file, &bytes).unwrap();
        let (code, out, err) = run_on(&file, false);
        assert_eq!((code, err.as_str()), (0, ""));
        let lines: Vec<&str> = out.lines().collect();
        assert_eq!(lines.len(), 7, "{out}");
        assert_eq!(lines[0], format!("Dumping {}", file.display()));
        assert_eq!(lines[1], "Log starting offset: 0");
        let crc = u32::from_be_bytes(bytes[17..21].try_into().unwrap());
        assert_eq!(
            lines[2],
            format!(
                "baseOffset: 0 lastOffset: 1 count: 2 baseSequence: 0 lastSequence: 1 producerId: -1 producerEpoch: -1 partitionLeaderEpoch: 0 isTransactional: false isControl: false deleteHorizonMs: OptionalLong.empty position: 0 CreateTime: 1700000000000 size: {first} magic: 2 compresscodec: none crc: {crc} isvalid: true"
            )
        );
        let (k0, v0) = commit("g", 0, 0);
        assert_eq!(
            lines[3],
            format!(
                "| offset: 0 CreateTime: 1700000000000 keySize: {} valueSize: {} sequence: 0 headerKeys: [] key: {} payload: {}",
                k0.len(),
                v0.as_ref().unwrap().len(),
                r#"{"type":"1","data":{"group":"g","topic":"orders","partition":0}}"#,
                r#"{"version":"4","data":{"offset":0,"leaderEpoch":-1,"metadata":"","commitTimestamp":1700000000000}}"#
            )
        );
        assert!(lines[4].starts_with("| offset: 1 CreateTime: 1700000000000 "));
        assert!(lines[4].contains(r#""partition":1}}"#));
        assert!(lines[5]
            .starts_with("baseOffset: 2 lastOffset: 2 count: 1 baseSequence: 0 lastSequence: 0 "));
        assert!(lines[5].contains(&format!("position: {first} CreateTime: 1700000000001 ")));
        assert_eq!(
            lines[6],
            format!(
                "| offset: 2 CreateTime: 1700000000001 keySize: {} valueSize: -1 sequence: 0 headerKeys: [] key: {} payload: <DELETE>",
                k.len(),
                r#"{"type":"1","data":{"group":"g","topic":"orders","partition":0}}"#
            )
        );
        // The verify mode of the same file.
        let (code, out, _) = run_on(&file, true);
        assert_eq!(
            (code, out.as_str()),
            (
                0,
                format!("OK: 2 batches, 3 records, {} bytes\n", bytes.len()).as_str()
            )
        );
    }

    #[test]
    fn verify_reports_the_first_bad_byte_offset_of_a_corrupted_copy() {
        let d = tmpdir("verify");
        let (bytes, starts) = segment(0, 5, 3);
        let good = d.0.join(storage::log::segment_name(0));
        std::fs::write(&good, &bytes).unwrap();
        assert_eq!(
            run_on(&good, true).1,
            format!("OK: 5 batches, 15 records, {} bytes\n", bytes.len())
        );

        // Flip one byte inside batch 3 (in a key): its CRC no longer matches.
        let mut flipped = bytes.clone();
        flipped[starts[3] + 70] ^= 0x01;
        let bad = d.0.join("copy.log");
        std::fs::write(&bad, &flipped).unwrap();
        let (code, out, _) = run_on(&bad, true);
        assert_eq!(code, 1);
        assert!(
            out.starts_with(&format!(
                "CORRUPT at byte offset {} of {}: ",
                starts[3],
                bad.display()
            )),
            "{out}"
        );
        assert!(out.contains("CRC mismatch"), "{out}");
        // The dump shows the three good batches, then says where the bad bytes start.
        let (code, out, _) = run_on(&bad, false);
        assert_eq!(code, 0);
        assert_eq!(
            out.lines().filter(|l| l.starts_with("baseOffset:")).count(),
            3
        );
        assert!(out.lines().last().unwrap().starts_with(&format!(
            "Found {} invalid bytes at the end of copy.log (byte offset {}: ",
            bytes.len() - starts[3],
            starts[3]
        )));

        // A torn tail: the last batch cut in the middle.
        std::fs::write(&bad, &bytes[..starts[4] + 20]).unwrap();
        let (code, out, _) = run_on(&bad, true);
        assert_eq!(code, 1);
        assert!(
            out.starts_with(&format!("CORRUPT at byte offset {} of ", starts[4])),
            "{out}"
        );
        assert!(out.contains("torn batch"), "{out}");

        // A lying length field (CRC does not cover it).
        let mut long = bytes.clone();
        long[starts[1] + 8..starts[1] + 12].copy_from_slice(&i32::MAX.to_be_bytes());
        std::fs::write(&bad, &long).unwrap();
        let (code, out, _) = run_on(&bad, true);
        assert_eq!(code, 1);
        assert!(
            out.starts_with(&format!("CORRUPT at byte offset {} of ", starts[1])),
            "{out}"
        );
    }

    #[test]
    fn a_partition_dir_is_read_in_offset_order_and_offsets_must_go_forward() {
        let d = tmpdir("dir");
        let (a, _) = segment(0, 2, 2); // offsets 0..3
        let (b, _) = segment(4, 1, 3); // offsets 4..6
        std::fs::write(d.0.join(storage::log::segment_name(4)), &b).unwrap();
        std::fs::write(d.0.join(storage::log::segment_name(0)), &a).unwrap();
        std::fs::write(d.0.join("00000000000000000000.index"), b"ignored").unwrap();
        let (code, out, _) = run_on(&d.0, true);
        assert_eq!(
            (code, out),
            (
                0,
                format!("OK: 3 batches, 7 records, {} bytes\n", a.len() + b.len())
            )
        );
        let (code, out, _) = run_on(&d.0, false);
        assert_eq!(code, 0);
        let offsets: Vec<&str> = out
            .lines()
            .filter_map(|l| l.strip_prefix("| offset: "))
            .map(|l| l.split(' ').next().unwrap())
            .collect();
        assert_eq!(offsets, ["0", "1", "2", "3", "4", "5", "6"]);
        assert_eq!(out.matches("Dumping ").count(), 2);
        assert!(out.contains("Log starting offset: 4"));

        // A second segment whose batch goes back to offset 2.
        let (back, _) = segment(2, 1, 1);
        let later = d.0.join(storage::log::segment_name(4));
        std::fs::write(&later, &back).unwrap();
        let (code, out, _) = run_on(&d.0, true);
        assert_eq!(code, 1);
        assert_eq!(
            out,
            format!(
                "CORRUPT at byte offset 0 of {}: batch base offset 2 goes back (expected >= 4)\n",
                later.display()
            )
        );
    }

    #[test]
    fn undecodable_records_are_warnings_and_bad_arguments_exit_2() {
        let d = tmpdir("warn");
        let (k, _) = commit("g", 0, 1);
        let mut bytes = Vec::new();
        encode_batch(0, 1, &[(Some(&k), Some(&[0, 9, 9]))], &mut bytes);
        let file = d.0.join(storage::log::segment_name(0));
        std::fs::write(&file, &bytes).unwrap();
        let (code, out, _) = run_on(&file, true);
        assert_eq!(code, 0);
        let lines: Vec<&str> = out.lines().collect();
        assert_eq!(lines.len(), 2, "{out}");
        assert!(
            lines[0].starts_with("WARNING: record at offset 0 "),
            "{out}"
        );
        assert_eq!(
            lines[1],
            format!("OK: 1 batches, 1 records, {} bytes", bytes.len())
        );

        let (code, _, err) = run_on(&d.0.join("missing.log"), false);
        assert_eq!(code, 2);
        assert!(err.contains("no such file"), "{err}");
        let empty = d.0.join("empty-dir");
        std::fs::create_dir_all(&empty).unwrap();
        let (code, _, err) = run_on(&empty, true);
        assert_eq!(code, 2);
        assert!(err.contains("no .log segment files"), "{err}");
    }

    #[test]
    fn header_keys_are_read_from_the_record() {
        // length, attributes, timestamp delta 0, offset delta 0, key "k", value null, then two
        // headers "h1" = "v" and "trace" = null (varints are zigzag).
        let mut rec = vec![0u8, 0, 0, 0, 2, b'k', 1, 4];
        rec.extend_from_slice(&[4, b'h', b'1', 2, b'v']);
        rec.extend_from_slice(&[10, b't', b'r', b'a', b'c', b'e', 1]);
        rec[0] = ((rec.len() - 1) * 2) as u8;
        assert_eq!(
            record_header_keys(&rec),
            vec!["h1".to_string(), "trace".to_string()]
        );
        // No headers; and a record cut short gives what was read before the cut.
        assert!(record_header_keys(&[8, 0, 0, 0, 1, 1, 0]).is_empty());
        assert_eq!(record_header_keys(&rec[..13]), vec!["h1".to_string()]);
    }

    #[test]
    fn control_batches_print_their_marker() {
        let r = Rec {
            offset: 0,
            timestamp: 0,
            key: Some(vec![0, 0, 0, 1]),
            value: Some(vec![0, 0, 0, 0, 0, 7]),
            header_keys: Vec::new(),
        };
        assert_eq!(
            control_record(&r),
            " endTxnMarker: COMMIT coordinatorEpoch: 7"
        );
        let r = Rec {
            key: Some(vec![0, 0, 0, 9]),
            ..r
        };
        assert_eq!(control_record(&r), " controlType: UNKNOWN(9)");
        // KRaft's records, as Kafka 4.4's kafka-dump-log printed them from a cluster node's Raft
        // log (`storage::raft_log`): the batches `storage::batch` writes.
        let record = |batch: Vec<u8>| {
            let storage::batch::Peek::Batch(h) =
                storage::batch::peek_batch(&batch, 0, 1 << 20).unwrap()
            else {
                panic!()
            };
            let rec = storage::batch::decode_records(&batch, &h, 0)
                .unwrap()
                .remove(0);
            Rec {
                offset: 0,
                timestamp: 0,
                key: rec.key.map(|k| k.to_vec()),
                value: rec.value.map(|v| v.to_vec()),
                header_keys: Vec::new(),
            }
        };
        let mut b = Vec::new();
        storage::batch::encode_leader_change(0, 0, 1, 1, &mut b);
        assert_eq!(
            control_record(&record(b)),
            r#" LeaderChange: {"version":0,"leaderId":1,"voters":[],"grantingVoters":[]}"#
        );
        let mut b = Vec::new();
        storage::batch::encode_voters_change(0, 0, 1, &[1, 2], b"change", &mut b);
        let zero = r#""voterDirectoryId":"AAAAAAAAAAAAAAAAAAAAAA","endpoints":[],"kRaftVersionFeature":{"minSupportedVersion":0,"maxSupportedVersion":1}"#;
        assert_eq!(
            control_record(&record(b)),
            format!(
                r#" KRaftVoters {{"version":0,"voters":[{{"voterId":1,{zero}}},{{"voterId":2,{zero}}}]}}"#
            )
        );
        // Kafka's own voters record, endpoints included: the bytes kafka-clients 4.4.0
        // serialises for voter 3, directory id all 0x01 bytes, endpoint CONTROLLER at
        // localhost:9093, versions 0..=1, and the JSON its `VotersRecordJsonConverter` writes.
        let mut v = vec![0, 0, 2, 0, 0, 0, 3];
        v.extend_from_slice(&[1; 16]);
        v.extend_from_slice(&[2, 11]);
        v.extend_from_slice(b"CONTROLLER");
        v.push(10);
        v.extend_from_slice(b"localhost");
        v.extend_from_slice(&9093u16.to_be_bytes());
        v.extend_from_slice(&[0, 0, 0, 0, 1, 0, 0, 0]);
        let r = Rec {
            offset: 0,
            timestamp: 0,
            key: Some(vec![0, 0, 0, 6]),
            value: Some(v.clone()),
            header_keys: Vec::new(),
        };
        assert_eq!(
            control_record(&r),
            r#" KRaftVoters {"version":0,"voters":[{"voterId":3,"voterDirectoryId":"AQEBAQEBAQEBAQEBAQEBAQ","endpoints":[{"name":"CONTROLLER","host":"localhost","port":9093}],"kRaftVersionFeature":{"minSupportedVersion":0,"maxSupportedVersion":1}}]}"#
        );
        // A value that does not parse: the control type, as before.
        v.push(0);
        let r = Rec {
            value: Some(v),
            ..r
        };
        assert_eq!(control_record(&r), " controlType: KRAFT_VOTERS(6)");
        assert_eq!(increment_sequence(i32::MAX, 1), 0);
        assert_eq!(increment_sequence(-1, 5), -1);
        assert_eq!(increment_sequence(3, 2), 5);
    }
}
