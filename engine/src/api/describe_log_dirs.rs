//! DescribeLogDirs: the node's one log directory and the partition logs in it, with their sizes
//! (`kafka-log-dirs --describe`, the Admin's `describeLogDirs`, and the tools and UIs built on
//! it).
//!
//! Kafka's answer (`KafkaApis.handleDescribeLogDirsRequest`, `ReplicaManager.describeLogDirs`):
//! Describe on the cluster, else CLUSTER_AUTHORIZATION_FAILED (top-level, v3+) and no results;
//! one result per log directory, each listing the logs it holds among those asked for (a null
//! topic list asks for all), with the log's size (its segments' bytes), its offset lag (the high
//! watermark minus the log end, at least 0: 0 for a current log) and whether it is a future log
//! (never here: one directory, no AlterReplicaLogDirs); v4 adds the volume's total and usable
//! bytes. A partition or topic this node holds no log of is left out, not refused.
//!
//! Here the directory is `--data-dir` (one per node: Kafka's `log.dirs` with one entry), and a
//! log is one per partition whose replica this node holds: every `__consumer_offsets`
//! partition, a topic partition the metadata log placed here, a partition of a topic replicated
//! on every node. Its size is the bytes of the segments (`*.log`) in its `<topic>-<partition>`
//! directory, 0 before its first record (the directory is made on first use; Kafka makes an
//! empty log when the partition is created); a replicated partition's Raft log (`raft/`) is not
//! counted, as Kafka does not count a KRaft node's metadata log. Without a data directory
//! (groups in memory only, tests) the node has no log directory, and the answer lists none (the
//! Java Admin takes an empty answer below v3 for an authorization failure).

use super::auth::{self, Op};
use super::common::Asked;
use crate::broker::Broker;
use crate::runtime::shard::Caller;
use kafka_protocol::messages::describe_log_dirs_response::{
    DescribeLogDirsPartition, DescribeLogDirsResult, DescribeLogDirsTopic,
};
use kafka_protocol::messages::*;
use kafka_protocol::ResponseError;
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// A volume's size Kafka answers when it cannot tell (the schema's default).
const UNKNOWN_BYTES: i64 = -1;

pub(super) async fn handle(
    broker: &Broker,
    caller: &Caller,
    req: DescribeLogDirsRequest,
    version: i16,
) -> DescribeLogDirsResponse {
    let mut resp = DescribeLogDirsResponse::default().with_throttle_time_ms(0);
    if !auth::cluster(broker, caller, Op::Describe) {
        if version >= 3 {
            resp.error_code = ResponseError::ClusterAuthorizationFailed.code();
        }
        return resp;
    }
    let Some(dir) = broker.data_dir.clone() else {
        return resp;
    };
    // The logs this node holds, by topic name: which partitions exist and are replicated here
    // is the registry's answer, read before the walk (which runs off the executor).
    let snap = broker.topics.snapshot();
    let asked = Asked::new(req.topics.map(|ts| {
        ts.into_iter()
            .map(|t| (t.topic.0.to_string(), t.partitions))
    }));
    let mut held: BTreeMap<String, BTreeSet<i32>> = BTreeMap::new();
    for t in snap.iter() {
        let ps: BTreeSet<i32> = (0..t.partitions)
            .filter(|p| asked.wants(&t.name, *p))
            .filter(|p| broker.serves(t, *p))
            .collect();
        if !ps.is_empty() {
            held.insert(t.name.to_string(), ps);
        }
    }
    let walked = glommio::executor()
        .spawn_blocking(move || walk(&dir, &held))
        .await;
    let (log_dir, topics, total, usable) = walked;
    resp.results.push(
        DescribeLogDirsResult::default()
            .with_error_code(0)
            .with_log_dir(log_dir.into())
            .with_topics(
                topics
                    .into_iter()
                    .map(|(name, parts)| {
                        DescribeLogDirsTopic::default()
                            .with_name(TopicName(name.into()))
                            .with_partitions(
                                parts
                                    .into_iter()
                                    .map(|(p, size)| {
                                        DescribeLogDirsPartition::default()
                                            .with_partition_index(p)
                                            .with_partition_size(size)
                                            .with_offset_lag(0)
                                            .with_is_future_key(false)
                                    })
                                    .collect(),
                            )
                    })
                    .collect(),
            )
            .with_total_bytes(total)
            .with_usable_bytes(usable),
    );
    resp
}

/// Logs found on disk, by topic then partition: their segments' bytes.
type Sizes = BTreeMap<String, BTreeMap<i32, i64>>;

/// The directory as Kafka names it (absolute), the sizes of the `held` partitions' logs in it,
/// and the volume's total and usable bytes.
fn walk(dir: &Path, held: &BTreeMap<String, BTreeSet<i32>>) -> (String, Sizes, i64, i64) {
    let abs: PathBuf = std::fs::canonicalize(dir).unwrap_or_else(|_| dir.to_path_buf());
    let mut sizes: Sizes = BTreeMap::new();
    for (topic, parts) in held {
        for &p in parts {
            let path = crate::data::partition_dir(&abs, topic, p);
            // A partition never written to has no directory yet: its log is empty (Kafka
            // creates every replica's log, empty, when the partition is created).
            let bytes: u64 = std::fs::read_dir(&path)
                .into_iter()
                .flatten()
                .filter_map(Result::ok)
                .filter(|e| e.file_name().to_string_lossy().ends_with(".log"))
                .filter_map(|e| e.metadata().ok())
                .filter(|m| m.is_file())
                .map(|m| m.len())
                .sum();
            sizes
                .entry(topic.clone())
                .or_default()
                .insert(p, i64::try_from(bytes).unwrap_or(i64::MAX));
        }
    }
    let (total, usable) = volume_bytes(&abs);
    (abs.to_string_lossy().into_owned(), sizes, total, usable)
}

/// The volume's total and usable bytes (Kafka's `FileStore.getTotalSpace` and
/// `getUsableSpace`: blocks available to an unprivileged user), or unknown.
fn volume_bytes(dir: &Path) -> (i64, i64) {
    match rustix::fs::statvfs(dir) {
        Ok(st) => {
            let bytes = |blocks: u64| {
                i64::try_from(u128::from(blocks) * u128::from(st.f_frsize)).unwrap_or(i64::MAX)
            };
            (bytes(st.f_blocks), bytes(st.f_bavail))
        }
        Err(_) => (UNKNOWN_BYTES, UNKNOWN_BYTES),
    }
}
