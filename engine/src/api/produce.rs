//! Produce: each partition's batch appended by the partition's shard; the answer leaves once the
//! batch is durable (acks=0 gets none).

use super::auth::{self, Op, Rt};
use super::calls::{call_all, verify_in_txn, TxnCheck};
use super::common::code;
use crate::data::{owner_shard, DataOp, DataReply};
use crate::runtime::shard::Caller;
use crate::runtime::shard::Shard;
use kafka_protocol::messages::*;
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::ResponseError;
use std::collections::HashMap;
use std::rc::Rc;

/// Produce v3–v13. Per partition, in Kafka's order (`ReplicaManager.appendRecords`,
/// `KafkaApis.handleProduceRequest`): unknown topic (id) → ResponseError::UnknownTopicOrPartition.code()
/// (UNKNOWN_TOPIC_ID from v13), the internal topic → INVALID_TOPIC_EXCEPTION, acks other than
/// 0/1/-1 → INVALID_REQUIRED_ACKS, then the shard validates and appends (`topic_data`).
///
/// Transactional batches are appended like others (the partition log tracks the transaction).
/// As Kafka (`KafkaApis.handleProduceRequest`), a request carrying transactional records without
/// a `transactional_id` fails whole with TRANSACTIONAL_ID_AUTHORIZATION_FAILED.
pub(super) async fn handle(
    shard: &Rc<Shard>,
    caller: &Caller,
    req: ProduceRequest,
    version: i16,
) -> ProduceResponse {
    use kafka_protocol::messages::produce_response::{
        PartitionProduceResponse, TopicProduceResponse,
    };
    let b = &shard.broker;
    // Transactional records need Write on the transactional id; every topic needs Write
    // (`KafkaApis.handleProduceRequest`).
    if has_transactional_records(&req)
        && (req.transactional_id.is_none()
            || !auth::allowed(
                b,
                caller,
                Op::Write,
                Rt::TransactionalId,
                req.transactional_id.as_deref().map_or("", |t| t.as_str()),
            ))
    {
        return error_response(
            &req,
            version,
            code(ResponseError::TransactionalIdAuthorizationFailed),
        );
    }
    let snap = shard.broker.topics.snapshot();
    let unverified = match verify_transaction(shard, &req, &snap, version).await {
        Ok(u) => u,
        Err(c) => return error_response(&req, version, c),
    };
    let shards = shard.router.shards();
    let by_id = version >= 13;
    let acks_ok = matches!(req.acks, 0 | 1 | -1);
    // (topic index, partition index, early error or the call's position)
    let mut slots: Vec<(usize, i32, Result<usize, i16>)> = Vec::new();
    let mut calls: Vec<(usize, DataOp)> = Vec::new();
    for (ti, t) in req.topic_data.iter().enumerate() {
        let topic = if by_id {
            snap.get_by_id(&t.topic_id)
        } else {
            snap.get(t.name.0.as_str())
        };
        for p in &t.partition_data {
            let name = match topic {
                Some(t) => t.name.as_str(),
                None => t.name.0.as_str(),
            };
            let early = match topic {
                None if by_id => Err(code(ResponseError::UnknownTopicId)),
                _ if !auth::allowed(b, caller, Op::Write, Rt::Topic, name) => {
                    Err(code(ResponseError::TopicAuthorizationFailed))
                }
                None => Err(code(ResponseError::UnknownTopicOrPartition)),
                Some(t) if p.index < 0 || p.index >= t.partitions => {
                    Err(code(ResponseError::UnknownTopicOrPartition))
                }
                Some(t) if t.internal => Err(code(ResponseError::InvalidTopicException)),
                Some(_) if !acks_ok => Err(code(ResponseError::InvalidRequiredAcks)),
                // A node of a cluster appends only to the partitions placed on it.
                Some(t) if !b.serves(t, p.index) => Err(code(ResponseError::NotLeaderOrFollower)),
                // KIP-890 verification of a transactional batch, before it is appended.
                Some(t) if is_transactional(p.records.as_ref()) => {
                    match unverified.get(&(t.name.clone(), p.index)) {
                        Some(c) => Err(*c),
                        None => Ok(()),
                    }
                    .map(|()| {
                        calls.push((
                            owner_shard(&t.name, p.index, shards),
                            DataOp::Append {
                                topic: t.clone(),
                                partition: p.index,
                                records: p.records.clone().unwrap_or_default(),
                            },
                        ));
                        calls.len() - 1
                    })
                }
                Some(t) => {
                    calls.push((
                        owner_shard(&t.name, p.index, shards),
                        DataOp::Append {
                            topic: t.clone(),
                            partition: p.index,
                            records: p.records.clone().unwrap_or_default(),
                        },
                    ));
                    Ok(calls.len() - 1)
                }
            };
            slots.push((ti, p.index, early));
        }
    }
    let answers = call_all(shard, calls).await;
    let mut responses: Vec<TopicProduceResponse> = req
        .topic_data
        .iter()
        .map(|t| {
            let mut r = TopicProduceResponse::default();
            if by_id {
                r.topic_id = t.topic_id;
            } else {
                r.name = t.name.clone();
            }
            r
        })
        .collect();
    for (ti, index, slot) in slots {
        let (error, message, base, append_time, start) = match slot {
            Err(e) => (e, None, -1, -1, -1),
            Ok(i) => match &answers[i] {
                Some(DataReply::Append(a)) => (
                    a.error,
                    a.message.clone(),
                    a.base_offset,
                    a.log_append_time,
                    a.log_start_offset,
                ),
                _ => (ResponseError::NotLeaderOrFollower.code(), None, -1, -1, -1),
            },
        };
        let mut pr = PartitionProduceResponse::default()
            .with_index(index)
            .with_error_code(error)
            .with_base_offset(base)
            .with_log_append_time_ms(append_time);
        // Fields the crate only encodes from the version that introduced them.
        if version >= 5 {
            pr.log_start_offset = start;
        }
        if version >= 8 {
            pr.error_message = message.map(StrBytes::from_string);
        }
        responses[ti].partition_responses.push(pr);
    }
    ProduceResponse::default()
        .with_throttle_time_ms(0)
        .with_responses(responses)
}

/// Any partition's batch is transactional (attributes bit 0x10 of the first batch, as
/// `RequestUtils.hasTransactionalRecords` looks at each partition's first batch). Records too
/// short to have attributes are left for the shard's validation to refuse.
fn has_transactional_records(req: &ProduceRequest) -> bool {
    req.topic_data.iter().any(|t| {
        t.partition_data
            .iter()
            .any(|p| is_transactional(p.records.as_ref()))
    })
}

fn is_transactional(records: Option<&bytes::Bytes>) -> bool {
    records
        .and_then(|r| r.get(21..23))
        .is_some_and(|a| i16::from_be_bytes([a[0], a[1]]) & 0x10 != 0)
}

/// Kafka's answer to a request refused before any append (`ProduceRequest.getErrorResponse`):
/// every partition gets `error`, base offset -1.
fn error_response(req: &ProduceRequest, version: i16, error: i16) -> ProduceResponse {
    use kafka_protocol::messages::produce_response::{
        PartitionProduceResponse, TopicProduceResponse,
    };
    let responses = req
        .topic_data
        .iter()
        .map(|t| {
            let mut r = TopicProduceResponse::default();
            if version >= 13 {
                r.topic_id = t.topic_id;
            } else {
                r.name = t.name.clone();
            }
            r.partition_responses = t
                .partition_data
                .iter()
                .map(|p| {
                    let mut pr = PartitionProduceResponse::default()
                        .with_index(p.index)
                        .with_error_code(error)
                        .with_base_offset(-1)
                        .with_log_append_time_ms(-1);
                    if version >= 5 {
                        pr.log_start_offset = -1;
                    }
                    pr
                })
                .collect();
            r
        })
        .collect();
    ProduceResponse::default()
        .with_throttle_time_ms(0)
        .with_responses(responses)
}

/// KIP-890 verification: before a transactional batch is appended, the transaction
/// coordinator confirms its partition is in the producer's open transaction (AddPartitionsToTxn
/// with verify_only, `ReplicaManager.appendRecords` → `maybeSendPartitionsToTransactionCoordinator`),
/// so a late batch of a transaction that already ended (a zombie, a retry after a timeout)
/// cannot start a transaction no coordinator knows of and hold the LSO back forever. From
/// Produce v12 (transactions version 2) the coordinator adds the partition instead (part 2):
/// the producer's current epoch is what proves the batch is not a zombie's. The
/// coordinator's errors become those producers understand
/// (`AddPartitionsToTxnManager`, `ReplicaManager`): PRODUCER_FENCED → INVALID_PRODUCER_EPOCH,
/// TRANSACTION_ABORTABLE → INVALID_TXN_STATE before Produce v11, and a coordinator that cannot
/// answer → NOT_ENOUGH_REPLICAS (retriable without a metadata refresh).
///
/// Returns the error of each (topic, partition) that failed; partitions absent are verified.
async fn verify_transaction(
    shard: &Rc<Shard>,
    req: &ProduceRequest,
    snap: &crate::topics::TopicsSnapshot,
    version: i16,
) -> Result<HashMap<(String, i32), i16>, i16> {
    let Some(id) = req.transactional_id.as_ref() else {
        return Ok(HashMap::new());
    };
    let mut producer: Option<(i64, i16)> = None;
    let mut partitions = Vec::new();
    for t in &req.topic_data {
        let topic = if version >= 13 {
            snap.get_by_id(&t.topic_id)
        } else {
            snap.get(t.name.0.as_str())
        };
        let Some(topic) = topic else { continue };
        for p in &t.partition_data {
            let Some(b) = p.records.as_ref().filter(|r| is_transactional(Some(r))) else {
                continue;
            };
            let Some(fields) = b.get(43..53) else {
                continue;
            };
            let pid = i64::from_be_bytes(fields[0..8].try_into().expect("8 bytes"));
            let epoch = i16::from_be_bytes([fields[8], fields[9]]);
            // Kafka: "Transactional records contained more than one producer ID".
            if producer.is_some_and(|pe| pe != (pid, epoch)) {
                return Err(code(ResponseError::InvalidProducerIdMapping));
            }
            producer = Some((pid, epoch));
            if p.index >= 0 && p.index < topic.partitions {
                partitions.push((topic.name.clone(), p.index));
            }
        }
    }
    let Some((pid, epoch)) = producer.filter(|_| !partitions.is_empty()) else {
        return Ok(HashMap::new());
    };
    // From v12 the client speaks transactions version 2 and never adds partitions itself: the
    // write adds them (`AddPartitionsToTxnManager.produceRequestVersionToTransactionSupportedOperation`).
    let check = if version >= 12 {
        TxnCheck::Add
    } else {
        TxnCheck::Verify
    };
    let codes = verify_in_txn(shard, &id.0, (pid, epoch), partitions.clone(), check).await;
    Ok(partitions
        .into_iter()
        .zip(codes)
        .filter(|(_, c)| *c != 0)
        .map(|(tp, c)| {
            let c = match ResponseError::try_from_code(c) {
                Some(ResponseError::ProducerFenced) => code(ResponseError::InvalidProducerEpoch),
                Some(ResponseError::TransactionAbortable) if version <= 10 => {
                    code(ResponseError::InvalidTxnState)
                }
                Some(
                    ResponseError::ConcurrentTransactions
                    | ResponseError::CoordinatorLoadInProgress
                    | ResponseError::CoordinatorNotAvailable
                    | ResponseError::NotCoordinator,
                ) => code(ResponseError::NotEnoughReplicas),
                _ => c,
            };
            (tp, c)
        })
        .collect())
}
