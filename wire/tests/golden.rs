//! Golden bytes for every API version we serve.
//!
//! Responses: for each (api, version) in `wire::versions::SERVED` a realistic, non-default response
//! is encoded with `wire::encode_response` and compared with `tests/golden/<api>_vNN.hex`
//! (the whole frame: length prefix, response header, body). `RINGLEADER_BLESS=1 cargo test -p
//! ringleader-wire --test golden` rewrites those files; without it a mismatch fails with a hex diff.
//! `GOLDEN_VARIANTS` adds further shapes of a served API (e.g. ConsumerGroupHeartbeat's error
//! response with a null assignment) as `<api>_<variant>_vNN.hex`.
//!
//! Blessed bytes prove nothing by themselves, so every golden frame is also walked field by field
//! by the small decoder in this file (`Walk`), written from the Kafka message schemas
//! (`clients/src/main/resources/common/message/*.json`: field order, `versions`,
//! `nullableVersions`, `flexibleVersions`, tagged fields) and not from the crate's encoder. The
//! walkers cover every served version, flexible and not.
//!
//! Requests: hand-built request bytes (as a client writes them, with the independent `Enc`
//! writer below) must decode through `wire::decode_request` into the expected values, at a low and
//! a high version of each served API, and the crate's request encoder must reproduce them.
//! Also pinned: the KIP-511 fallback frame for an ApiVersions request of a too-new version.

use bytes::{Bytes, BytesMut};
use std::fmt::Write as _;
use std::path::PathBuf;
use wire::api_versions::unsupported_version_frame;
use wire::codec::{decode_response, encode_request, KNOWN_API_KEYS};
use wire::kafka_protocol::messages::*;
use wire::kafka_protocol::protocol::StrBytes;
use wire::kafka_protocol::ResponseError;
use wire::versions::SERVED;
use wire::{
    decode_request, encode_response, DecodeError, Request, RequestHeader, Response, Versions,
};

// ---------------------------------------------------------------------------------------------
// The values the golden responses carry.

const CID: i32 = 0x1234_5678;
const THROTTLE: i32 = 25;
const NODE: i32 = 1;
const HOST: &str = "127.0.0.1";
const PORT: i32 = 9092;
const RACK: &str = "rack-a";
const CLUSTER_ID: &str = "MkU3OEVBNTcwNTJENDM2Qk";
const TOPIC: &str = "orders";
const TOPIC_ID: [u8; 16] = [
    0x7d, 0x3c, 0x8a, 0x1e, 0x52, 0xb4, 0x4f, 0x6e, 0x9a, 0x0d, 0x1c, 0x2b, 0x3e, 0x4f, 0x5a, 0x6b,
];
const AUDIT_TOPIC: &str = "audit-log";
const AUDIT_TOPIC_ID: [u8; 16] = [
    0x21, 0x6f, 0x0e, 0x94, 0x3c, 0x5d, 0x47, 0x18, 0xb1, 0x22, 0x9e, 0x4a, 0x70, 0x01, 0xc3, 0xd5,
];
const GHOST_TOPIC_ID: [u8; 16] = [
    0xc0, 0xff, 0xee, 0x00, 0x11, 0x22, 0x43, 0x33, 0x84, 0x44, 0x55, 0x66, 0x77, 0x88, 0x99, 0xaa,
];
/// Leader epoch of partition 0; partition 1 has one more.
const LEADER_EPOCH: i32 = 7;
/// READ, WRITE, CREATE, DELETE, ALTER, DESCRIBE, DESCRIBE_CONFIGS, ALTER_CONFIGS (AclOperation codes).
const TOPIC_OPS: i32 = 3576;
/// CREATE, ALTER, DESCRIBE, CLUSTER_ACTION, DESCRIBE_CONFIGS, ALTER_CONFIGS, IDEMPOTENT_WRITE.
const CLUSTER_OPS: i32 = 8096;
/// ApiVersions body of the golden responses: fixed here so the files do not move with `SERVED`.
const ADVERTISED: &[(i16, i16, i16)] = &[
    (3, 0, 13),
    (10, 0, 6),
    (18, 0, 4),
    (19, 2, 7),
    (20, 1, 6),
    (32, 1, 4),
    (60, 0, 2),
];
const FINALIZED_EPOCH: i64 = 1234;
const INVALID_TOPIC_MSG: &str = "Topic name \"bad topic\" is illegal, it contains a character \
                                 other than ASCII alphanumerics, '.', '_' and '-'";
const UNKNOWN_TOPIC_MSG: &str = "This server does not host this topic-partition.";
const UNKNOWN_TOPIC_ID_MSG: &str = "This server does not host this topic ID.";
const COORDINATOR_NA_MSG: &str = "The coordinator is not available.";
const CLEANUP_DOC: &str = "Designates the retention policy to use on old log segments.";
const RETENTION_HOURS_DOC: &str = "The number of hours to keep a log file before deleting it.";

fn s(v: &str) -> StrBytes {
    StrBytes::from_string(v.to_owned())
}

fn uuid(b: [u8; 16]) -> uuid::Uuid {
    uuid::Uuid::from_bytes(b)
}

// ---------------------------------------------------------------------------------------------
// Golden responses, one builder per API. Fields are set only in the versions that carry them.

fn metadata_response(v: i16) -> MetadataResponse {
    use metadata_response::*;
    let mut broker = MetadataResponseBroker::default()
        .with_node_id(BrokerId(NODE))
        .with_host(s(HOST))
        .with_port(PORT);
    if v >= 1 {
        broker.rack = Some(s(RACK));
    }
    let partitions = (0..2)
        .map(|i| {
            let mut p = MetadataResponsePartition::default()
                .with_error_code(0)
                .with_partition_index(i)
                .with_leader_id(BrokerId(NODE))
                .with_replica_nodes(vec![BrokerId(NODE)])
                .with_isr_nodes(vec![BrokerId(NODE)]);
            if v >= 7 {
                p.leader_epoch = LEADER_EPOCH + i;
            }
            p
        })
        .collect();
    let mut topic = MetadataResponseTopic::default()
        .with_name(Some(s(TOPIC).into()))
        .with_partitions(partitions);
    if v >= 10 {
        topic.topic_id = uuid(TOPIC_ID);
    }
    if v >= 8 {
        topic.topic_authorized_operations = TOPIC_OPS;
    }
    let mut r = MetadataResponse::default()
        .with_brokers(vec![broker])
        .with_topics(vec![topic]);
    if v >= 3 {
        r.throttle_time_ms = THROTTLE;
    }
    if v >= 2 {
        r.cluster_id = Some(s(CLUSTER_ID));
    }
    if v >= 1 {
        r.controller_id = BrokerId(NODE);
    }
    if (8..=10).contains(&v) {
        r.cluster_authorized_operations = CLUSTER_OPS;
    }
    r
}

fn find_coordinator_response(v: i16) -> FindCoordinatorResponse {
    use find_coordinator_response::*;
    let mut r = FindCoordinatorResponse::default();
    if v >= 1 {
        r.throttle_time_ms = THROTTLE;
    }
    if v <= 3 {
        r.error_code = 0;
        if v >= 1 {
            r.error_message = None;
        }
        r.node_id = BrokerId(NODE);
        r.host = s(HOST);
        r.port = PORT;
    } else {
        let ok = |key: &str| {
            Coordinator::default()
                .with_key(s(key))
                .with_node_id(BrokerId(NODE))
                .with_host(s(HOST))
                .with_port(PORT)
                .with_error_code(0)
                .with_error_message(None)
        };
        r.coordinators = vec![
            ok("g-classic"),
            ok("g-consumer"),
            Coordinator::default()
                .with_key(s("g-offline"))
                .with_node_id(BrokerId(-1))
                .with_host(s(""))
                .with_port(-1)
                .with_error_code(ResponseError::CoordinatorNotAvailable.code())
                .with_error_message(Some(s(COORDINATOR_NA_MSG))),
        ];
    }
    r
}

fn api_versions_response(v: i16) -> ApiVersionsResponse {
    use api_versions_response::*;
    let mut r = ApiVersionsResponse::default()
        .with_error_code(0)
        .with_api_keys(
            ADVERTISED
                .iter()
                .map(|&(k, min, max)| {
                    ApiVersion::default()
                        .with_api_key(k)
                        .with_min_version(min)
                        .with_max_version(max)
                })
                .collect(),
        );
    if v >= 1 {
        r.throttle_time_ms = THROTTLE;
    }
    if v >= 3 {
        // v3 omits features whose minimum is 0 (KAFKA-17011), v4 lists them.
        if v >= 4 {
            r.supported_features.push(
                SupportedFeatureKey::default()
                    .with_name(s("group.version"))
                    .with_min_version(0)
                    .with_max_version(1),
            );
        }
        r.supported_features.push(
            SupportedFeatureKey::default()
                .with_name(s("metadata.version"))
                .with_min_version(7)
                .with_max_version(27),
        );
        r.finalized_features_epoch = FINALIZED_EPOCH;
        r.finalized_features = vec![
            FinalizedFeatureKey::default()
                .with_name(s("group.version"))
                .with_max_version_level(1)
                .with_min_version_level(1),
            FinalizedFeatureKey::default()
                .with_name(s("metadata.version"))
                .with_max_version_level(27)
                .with_min_version_level(27),
        ];
    }
    r
}

fn create_topics_response(v: i16) -> CreateTopicsResponse {
    use create_topics_response::*;
    let config = |name: &str, value: &str, source: i8| {
        CreatableTopicConfigs::default()
            .with_name(s(name))
            .with_value(Some(s(value)))
            .with_read_only(false)
            .with_config_source(source)
            .with_is_sensitive(false)
    };
    let mut orders = CreatableTopicResult::default()
        .with_name(s(TOPIC).into())
        .with_error_code(0)
        .with_error_message(None);
    let mut audit = CreatableTopicResult::default()
        .with_name(s(AUDIT_TOPIC).into())
        .with_error_code(0)
        .with_error_message(None);
    let mut bad = CreatableTopicResult::default()
        .with_name(s("bad topic").into())
        .with_error_code(ResponseError::InvalidTopicException.code())
        .with_error_message(Some(s(INVALID_TOPIC_MSG)));
    if v >= 7 {
        orders.topic_id = uuid(TOPIC_ID);
        audit.topic_id = uuid(AUDIT_TOPIC_ID);
    }
    if v >= 5 {
        orders.num_partitions = 2;
        orders.replication_factor = 1;
        orders.configs = Some(vec![
            config("cleanup.policy", "delete", 5),
            config("retention.ms", "86400000", 1),
        ]);
        // Created, but the caller may not describe its configs: the tagged TopicConfigErrorCode.
        audit.num_partitions = 1;
        audit.replication_factor = 1;
        audit.configs = None;
        audit.topic_config_error_code = ResponseError::TopicAuthorizationFailed.code();
        bad.num_partitions = -1;
        bad.replication_factor = -1;
        bad.configs = None;
    }
    CreateTopicsResponse::default()
        .with_throttle_time_ms(THROTTLE)
        .with_topics(vec![orders, audit, bad])
}

fn delete_topics_response(v: i16) -> DeleteTopicsResponse {
    use delete_topics_response::*;
    let mut orders = DeletableTopicResult::default()
        .with_name(Some(s(TOPIC).into()))
        .with_error_code(0);
    let mut ghost = DeletableTopicResult::default()
        .with_name(Some(s("ghost").into()))
        .with_error_code(ResponseError::UnknownTopicOrPartition.code());
    if v >= 5 {
        orders.error_message = None;
        ghost.error_message = Some(s(UNKNOWN_TOPIC_MSG));
    }
    let mut responses = vec![orders];
    if v >= 6 {
        responses[0].topic_id = uuid(TOPIC_ID);
        responses.push(ghost);
        // Deleted by id, unknown: the name is null (nullable from v6).
        responses.push(
            DeletableTopicResult::default()
                .with_name(None)
                .with_topic_id(uuid(GHOST_TOPIC_ID))
                .with_error_code(ResponseError::UnknownTopicId.code())
                .with_error_message(Some(s(UNKNOWN_TOPIC_ID_MSG))),
        );
    } else {
        responses.push(ghost);
    }
    DeleteTopicsResponse::default()
        .with_throttle_time_ms(THROTTLE)
        .with_responses(responses)
}

fn describe_configs_response(v: i16) -> DescribeConfigsResponse {
    use describe_configs_response::*;
    let syn = |name: &str, value: &str, source: i8| {
        DescribeConfigsSynonym::default()
            .with_name(s(name))
            .with_value(Some(s(value)))
            .with_source(source)
    };
    let mut cleanup = DescribeConfigsResourceResult::default()
        .with_name(s("cleanup.policy"))
        .with_value(Some(s("delete")))
        .with_read_only(false)
        .with_config_source(5)
        .with_is_sensitive(false)
        .with_synonyms(vec![syn("log.cleanup.policy", "delete", 5)]);
    let mut retention = DescribeConfigsResourceResult::default()
        .with_name(s("retention.ms"))
        .with_value(Some(s("86400000")))
        .with_read_only(false)
        .with_config_source(1)
        .with_is_sensitive(false)
        .with_synonyms(vec![
            syn("retention.ms", "86400000", 1),
            syn("log.retention.hours", "168", 5),
        ]);
    let mut hours = DescribeConfigsResourceResult::default()
        .with_name(s("log.retention.hours"))
        .with_value(Some(s("168")))
        .with_read_only(true)
        .with_config_source(4)
        .with_is_sensitive(false)
        .with_synonyms(vec![syn("log.retention.hours", "168", 4)]);
    let mut password = DescribeConfigsResourceResult::default()
        .with_name(s("ssl.keystore.password"))
        .with_value(None)
        .with_read_only(true)
        .with_config_source(4)
        .with_is_sensitive(true)
        .with_synonyms(vec![]);
    if v >= 3 {
        cleanup.config_type = 7; // LIST
        cleanup.documentation = Some(s(CLEANUP_DOC));
        retention.config_type = 5; // LONG
        retention.documentation = None;
        hours.config_type = 3; // INT
        hours.documentation = Some(s(RETENTION_HOURS_DOC));
        password.config_type = 9; // PASSWORD
        password.documentation = None;
    }
    DescribeConfigsResponse::default()
        .with_throttle_time_ms(THROTTLE)
        .with_results(vec![
            DescribeConfigsResult::default()
                .with_error_code(0)
                .with_error_message(None)
                .with_resource_type(2)
                .with_resource_name(s(TOPIC))
                .with_configs(vec![cleanup, retention]),
            DescribeConfigsResult::default()
                .with_error_code(0)
                .with_error_message(None)
                .with_resource_type(4)
                .with_resource_name(s("1"))
                .with_configs(vec![hours, password]),
        ])
}

fn describe_cluster_response(v: i16) -> DescribeClusterResponse {
    use describe_cluster_response::*;
    let mut broker = DescribeClusterBroker::default()
        .with_broker_id(BrokerId(NODE))
        .with_host(s(HOST))
        .with_port(PORT)
        .with_rack(Some(s(RACK)));
    if v >= 2 {
        broker.is_fenced = false;
    }
    let mut r = DescribeClusterResponse::default()
        .with_throttle_time_ms(THROTTLE)
        .with_error_code(0)
        .with_error_message(None)
        .with_cluster_id(s(CLUSTER_ID))
        .with_controller_id(BrokerId(NODE))
        .with_brokers(vec![broker])
        .with_cluster_authorized_operations(CLUSTER_OPS);
    if v >= 1 {
        r.endpoint_type = 1;
    }
    r
}

// The config and partition admin APIs: AlterConfigs (33), CreatePartitions (37) and
// IncrementalAlterConfigs (44).

const INVALID_RETENTION_MSG: &str =
    "Invalid value abc for configuration retention.ms: Not a number of type LONG";
const INVALID_MIN_ISR_MSG: &str =
    "Invalid value 0 for configuration min.insync.replicas: Value must be at least 1";
const INVALID_PARTITIONS_MSG: &str =
    "Topic currently has 3 partitions, which is higher than the requested 2.";
const THROTTLED_MSG: &str = "The throttling quota has been exceeded.";

/// One AlterConfigs / IncrementalAlterConfigs resource result:
/// (error code, error message, resource type, resource name).
type ConfigResult = (i16, Option<&'static str>, i8, &'static str);

/// AlterConfigs: orders altered; audit-log rejected (a bad value); ghost does not exist.
const ALTERED_CONFIGS: &[ConfigResult] = &[
    (0, None, 2, TOPIC),
    (
        ResponseError::InvalidConfig.code(),
        Some(INVALID_RETENTION_MSG),
        2,
        AUDIT_TOPIC,
    ),
    (
        ResponseError::UnknownTopicOrPartition.code(),
        Some(UNKNOWN_TOPIC_MSG),
        2,
        "ghost",
    ),
];

/// IncrementalAlterConfigs: orders altered; audit-log rejected; broker 1 altered.
const INCREMENTALLY_ALTERED: &[ConfigResult] = &[
    (0, None, 2, TOPIC),
    (
        ResponseError::InvalidConfig.code(),
        Some(INVALID_MIN_ISR_MSG),
        2,
        AUDIT_TOPIC,
    ),
    (0, None, 4, "1"),
];

/// One CreatePartitions topic result: (name, error code, error message).
type PartitionsResult = (&'static str, i16, Option<&'static str>);

/// CreatePartitions in every served version: orders grown; audit-log asked to shrink; ghost unknown.
const PARTITIONS_CREATED: &[PartitionsResult] = &[
    (TOPIC, 0, None),
    (
        AUDIT_TOPIC,
        ResponseError::InvalidPartitions.code(),
        Some(INVALID_PARTITIONS_MSG),
    ),
    (
        "ghost",
        ResponseError::UnknownTopicOrPartition.code(),
        Some(UNKNOWN_TOPIC_MSG),
    ),
];

/// From v3 (KIP-599) a topic may also be refused for the controller mutation quota.
const PARTITIONS_THROTTLED: PartitionsResult = (
    "payments",
    ResponseError::ThrottlingQuotaExceeded.code(),
    Some(THROTTLED_MSG),
);

fn partitions_created(v: i16) -> Vec<PartitionsResult> {
    let mut out = PARTITIONS_CREATED.to_vec();
    if v >= 3 {
        out.push(PARTITIONS_THROTTLED);
    }
    out
}

fn alter_configs_response(_v: i16) -> AlterConfigsResponse {
    use alter_configs_response::*;
    AlterConfigsResponse::default()
        .with_throttle_time_ms(THROTTLE)
        .with_responses(
            ALTERED_CONFIGS
                .iter()
                .map(|&(e, msg, rtype, rname)| {
                    AlterConfigsResourceResponse::default()
                        .with_error_code(e)
                        .with_error_message(msg.map(s))
                        .with_resource_type(rtype)
                        .with_resource_name(s(rname))
                })
                .collect(),
        )
}

fn create_partitions_response(v: i16) -> CreatePartitionsResponse {
    use create_partitions_response::*;
    CreatePartitionsResponse::default()
        .with_throttle_time_ms(THROTTLE)
        .with_results(
            partitions_created(v)
                .into_iter()
                .map(|(name, e, msg)| {
                    CreatePartitionsTopicResult::default()
                        .with_name(s(name).into())
                        .with_error_code(e)
                        .with_error_message(msg.map(s))
                })
                .collect(),
        )
}

fn incremental_alter_configs_response(_v: i16) -> IncrementalAlterConfigsResponse {
    use incremental_alter_configs_response::*;
    IncrementalAlterConfigsResponse::default()
        .with_throttle_time_ms(THROTTLE)
        .with_responses(
            INCREMENTALLY_ALTERED
                .iter()
                .map(|&(e, msg, rtype, rname)| {
                    AlterConfigsResourceResponse::default()
                        .with_error_code(e)
                        .with_error_message(msg.map(s))
                        .with_resource_type(rtype)
                        .with_resource_name(s(rname))
                })
                .collect(),
        )
}

// ---------------------------------------------------------------------------------------------
// The group and data-path APIs: shared values. Their walkers follow the trunk (4.1+) JSONs, which
// carry DescribeGroups v6, Fetch v18 and the OffsetCommit/OffsetFetch v10 topic-id shapes.

const GROUP: &str = "g-classic";
const UNKNOWN_GROUP: &str = "g-unknown";
const LOADING_GROUP: &str = "g-loading";
const GROUP_NOT_FOUND_MSG: &str = "Group g-unknown not found.";
const GENERATION: i32 = 3;
const PROTOCOL_TYPE: &str = "consumer";
const ASSIGNOR: &str = "range";
/// READ, DELETE, DESCRIBE (AclOperation codes 3, 6, 8) on a group.
const GROUP_OPS: i32 = (1 << 3) | (1 << 6) | (1 << 8);
/// AuthorizedOperations when not requested or not known (the schema default).
const OPS_OMITTED: i32 = i32::MIN;
/// The second broker: partition 1's new leader and the preferred read replica of partition 0.
const NODE2: i32 = 2;
const HOST2: &str = "127.0.0.2";
const RACK2: &str = "rack-b";
const HIGH_WATERMARK: i64 = 42;
const FETCH_SESSION: i32 = 917_362_114;
const FOUND_TIMESTAMP: i64 = 1_700_000_000_123;

/// One member of `GROUP`: what the golden JoinGroup, SyncGroup and DescribeGroups carry.
struct Member {
    id: &'static str,
    instance: Option<&'static str>,
    client_id: &'static str,
    client_host: &'static str,
    topics: &'static [&'static str],
    assigned: &'static [(&'static str, &'static [i32])],
}

/// The leader (static, librdkafka) and a dynamic Java member.
const MEMBERS: [Member; 2] = [
    Member {
        id: "rdkafka-5b6f0e7a-3d2c-4e8b-9f1a-0c7d2e4b8a61",
        instance: Some("consumer-a-1"),
        client_id: "rdkafka",
        client_host: "/127.0.0.1",
        topics: &[TOPIC],
        assigned: &[(TOPIC, &[0])],
    },
    Member {
        id: "consumer-g-classic-2-0f1e2d3c-4b5a-4697-8877-665544332211",
        instance: None,
        client_id: "consumer-g-classic-2",
        client_host: "/10.0.0.7",
        topics: &[TOPIC, AUDIT_TOPIC],
        assigned: &[(TOPIC, &[1]), (AUDIT_TOPIC, &[0])],
    },
];

/// (partition, committed offset, leader epoch, metadata).
type Committed = (i32, i64, i32, &'static str);

/// Committed offsets of `GROUP` per topic; offset -1 with metadata "" is Kafka's "no committed
/// offset".
const COMMITTED: &[(&str, &[Committed])] = &[
    (
        TOPIC,
        &[(0, HIGH_WATERMARK, LEADER_EPOCH, ""), (1, -1, -1, "")],
    ),
    (AUDIT_TOPIC, &[(0, 5, 0, "checkpoint-5")]),
];

/// ConsumerProtocolSubscription v0 (`Topics`, null `UserData`), written by hand: the opaque
/// member metadata the golden group responses carry.
fn subscription(topics: &[&str]) -> Vec<u8> {
    let mut b = 0i16.to_be_bytes().to_vec();
    b.extend_from_slice(&(topics.len() as i32).to_be_bytes());
    for t in topics {
        b.extend_from_slice(&(t.len() as i16).to_be_bytes());
        b.extend_from_slice(t.as_bytes());
    }
    b.extend_from_slice(&(-1i32).to_be_bytes());
    b
}

/// ConsumerProtocolAssignment v0 (`AssignedPartitions`, null `UserData`), written by hand.
fn assignment(parts: &[(&str, &[i32])]) -> Vec<u8> {
    let mut b = 0i16.to_be_bytes().to_vec();
    b.extend_from_slice(&(parts.len() as i32).to_be_bytes());
    for (t, ps) in parts {
        b.extend_from_slice(&(t.len() as i16).to_be_bytes());
        b.extend_from_slice(t.as_bytes());
        b.extend_from_slice(&(ps.len() as i32).to_be_bytes());
        for p in *ps {
            b.extend_from_slice(&p.to_be_bytes());
        }
    }
    b.extend_from_slice(&(-1i32).to_be_bytes());
    b
}

fn fetch_response(v: i16) -> FetchResponse {
    use fetch_response::*;
    // Partition 0: nothing new at the log end, read_committed (no aborted transactions); from
    // v11 the leader points the consumer at broker 2 (KIP-392). Partition 1: its leader moved
    // (NOT_LEADER_OR_FOLLOWER); from v12 the new leader rides along (KIP-951).
    let mut p0 = PartitionData::default()
        .with_partition_index(0)
        .with_error_code(0)
        .with_high_watermark(HIGH_WATERMARK)
        .with_last_stable_offset(HIGH_WATERMARK)
        .with_aborted_transactions(Some(vec![]))
        .with_records(Some(Bytes::new()));
    let mut p1 = PartitionData::default()
        .with_partition_index(1)
        .with_error_code(ResponseError::NotLeaderOrFollower.code())
        .with_high_watermark(-1)
        .with_last_stable_offset(-1)
        .with_aborted_transactions(None)
        .with_records(Some(Bytes::new()));
    if v >= 5 {
        p0.log_start_offset = 0;
        p1.log_start_offset = -1;
    }
    if v >= 11 {
        p0.preferred_read_replica = BrokerId(NODE2);
        p1.preferred_read_replica = BrokerId(-1);
    }
    if v >= 12 {
        p1.current_leader = LeaderIdAndEpoch::default()
            .with_leader_id(BrokerId(NODE2))
            .with_leader_epoch(LEADER_EPOCH + 2);
    }
    let mut topic = FetchableTopicResponse::default().with_partitions(vec![p0, p1]);
    if v <= 12 {
        topic.topic = s(TOPIC).into();
    } else {
        topic.topic_id = uuid(TOPIC_ID);
    }
    let mut r = FetchResponse::default()
        .with_throttle_time_ms(THROTTLE)
        .with_responses(vec![topic]);
    if v >= 7 {
        r.error_code = 0;
        r.session_id = FETCH_SESSION;
    }
    if v >= 16 {
        r.node_endpoints = vec![NodeEndpoint::default()
            .with_node_id(BrokerId(NODE2))
            .with_host(s(HOST2))
            .with_port(PORT)
            .with_rack(Some(s(RACK2)))];
    }
    r
}

fn list_offsets_response(v: i16) -> ListOffsetsResponse {
    use list_offsets_response::*;
    let part = |index: i32, error: i16, timestamp: i64, offset: i64, epoch: i32| {
        let mut p = ListOffsetsPartitionResponse::default()
            .with_partition_index(index)
            .with_error_code(error)
            .with_timestamp(timestamp)
            .with_offset(offset);
        if v >= 4 {
            p.leader_epoch = epoch;
        }
        p
    };
    let mut r = ListOffsetsResponse::default().with_topics(vec![
        // Partition 0 asked for latest (-1), partition 1 by timestamp.
        ListOffsetsTopicResponse::default()
            .with_name(s(TOPIC).into())
            .with_partitions(vec![
                part(0, 0, -1, HIGH_WATERMARK, LEADER_EPOCH),
                part(1, 0, FOUND_TIMESTAMP, 17, LEADER_EPOCH + 1),
            ]),
        ListOffsetsTopicResponse::default()
            .with_name(s("ghost").into())
            .with_partitions(vec![part(
                0,
                ResponseError::UnknownTopicOrPartition.code(),
                -1,
                -1,
                -1,
            )]),
    ]);
    if v >= 2 {
        r.throttle_time_ms = THROTTLE;
    }
    r
}

fn offset_commit_response(v: i16) -> OffsetCommitResponse {
    use offset_commit_response::*;
    let topic = |name: &str, parts: &[(i32, i16)]| {
        OffsetCommitResponseTopic::default()
            .with_name(s(name).into())
            .with_partitions(
                parts
                    .iter()
                    .map(|&(p, e)| {
                        OffsetCommitResponsePartition::default()
                            .with_partition_index(p)
                            .with_error_code(e)
                    })
                    .collect(),
            )
    };
    let mut r = OffsetCommitResponse::default().with_topics(vec![
        topic(TOPIC, &[(0, 0), (1, 0)]),
        // OFFSET_METADATA_TOO_LARGE, UNKNOWN_TOPIC_OR_PARTITION.
        topic(
            AUDIT_TOPIC,
            &[
                (0, ResponseError::OffsetMetadataTooLarge.code()),
                (3, ResponseError::UnknownTopicOrPartition.code()),
            ],
        ),
    ]);
    if v >= 3 {
        r.throttle_time_ms = THROTTLE;
    }
    r
}

fn offset_fetch_response(v: i16) -> OffsetFetchResponse {
    use offset_fetch_response::*;
    let mut r = OffsetFetchResponse::default();
    if v >= 3 {
        r.throttle_time_ms = THROTTLE;
    }
    if v <= 7 {
        r.topics = COMMITTED
            .iter()
            .map(|&(name, parts)| {
                OffsetFetchResponseTopic::default()
                    .with_name(s(name).into())
                    .with_partitions(
                        parts
                            .iter()
                            .map(|&(p, offset, epoch, meta)| {
                                let mut x = OffsetFetchResponsePartition::default()
                                    .with_partition_index(p)
                                    .with_committed_offset(offset)
                                    .with_metadata(Some(s(meta)))
                                    .with_error_code(0);
                                if v >= 5 {
                                    x.committed_leader_epoch = epoch;
                                }
                                x
                            })
                            .collect(),
                    )
            })
            .collect();
        if v >= 2 {
            r.error_code = 0;
        }
    } else {
        let topics = COMMITTED
            .iter()
            .map(|&(name, parts)| {
                OffsetFetchResponseTopics::default()
                    .with_name(s(name).into())
                    .with_partitions(
                        parts
                            .iter()
                            .map(|&(p, offset, epoch, meta)| {
                                OffsetFetchResponsePartitions::default()
                                    .with_partition_index(p)
                                    .with_committed_offset(offset)
                                    .with_committed_leader_epoch(epoch)
                                    .with_metadata(Some(s(meta)))
                                    .with_error_code(0)
                            })
                            .collect(),
                    )
            })
            .collect();
        r.groups = vec![
            OffsetFetchResponseGroup::default()
                .with_group_id(s(GROUP).into())
                .with_topics(topics)
                .with_error_code(0),
            // COORDINATOR_LOAD_IN_PROGRESS for the second group of the batch.
            OffsetFetchResponseGroup::default()
                .with_group_id(s(LOADING_GROUP).into())
                .with_topics(vec![])
                .with_error_code(ResponseError::CoordinatorLoadInProgress.code()),
        ];
    }
    r
}

fn join_group_response(v: i16) -> JoinGroupResponse {
    use join_group_response::*;
    let members = MEMBERS
        .iter()
        .map(|m| {
            let mut x = JoinGroupResponseMember::default()
                .with_member_id(s(m.id))
                .with_metadata(Bytes::from(subscription(m.topics)));
            if v >= 5 {
                x.group_instance_id = m.instance.map(s);
            }
            x
        })
        .collect();
    let mut r = JoinGroupResponse::default()
        .with_error_code(0)
        .with_generation_id(GENERATION)
        .with_protocol_name(Some(s(ASSIGNOR)))
        .with_leader(s(MEMBERS[0].id))
        .with_member_id(s(MEMBERS[0].id))
        .with_members(members);
    if v >= 2 {
        r.throttle_time_ms = THROTTLE;
    }
    if v >= 7 {
        r.protocol_type = Some(s(PROTOCOL_TYPE));
    }
    if v >= 9 {
        // The static leader re-joined with unchanged metadata: it gets the members but must not
        // re-assign (KIP-814).
        r.skip_assignment = true;
    }
    r
}

fn heartbeat_response(v: i16) -> HeartbeatResponse {
    let mut r =
        HeartbeatResponse::default().with_error_code(ResponseError::RebalanceInProgress.code());
    if v >= 1 {
        r.throttle_time_ms = THROTTLE;
    }
    r
}

fn leave_group_response(v: i16) -> LeaveGroupResponse {
    use leave_group_response::*;
    let mut r = LeaveGroupResponse::default();
    if v >= 1 {
        r.throttle_time_ms = THROTTLE;
    }
    if v <= 2 {
        // One member per request: its error is the top-level error (UNKNOWN_MEMBER_ID).
        r.error_code = ResponseError::UnknownMemberId.code();
    } else {
        r.error_code = 0;
        r.members = vec![
            MemberResponse::default()
                .with_member_id(s(MEMBERS[0].id))
                .with_group_instance_id(MEMBERS[0].instance.map(s))
                .with_error_code(0),
            // An admin removing a static member by instance id that is not in the group.
            MemberResponse::default()
                .with_member_id(s(""))
                .with_group_instance_id(Some(s("consumer-c-9")))
                .with_error_code(ResponseError::UnknownMemberId.code()),
        ];
    }
    r
}

fn sync_group_response(v: i16) -> SyncGroupResponse {
    let mut r = SyncGroupResponse::default()
        .with_error_code(0)
        .with_assignment(Bytes::from(assignment(MEMBERS[0].assigned)));
    if v >= 1 {
        r.throttle_time_ms = THROTTLE;
    }
    if v >= 5 {
        r.protocol_type = Some(s(PROTOCOL_TYPE));
        r.protocol_name = Some(s(ASSIGNOR));
    }
    r
}

fn describe_groups_response(v: i16) -> DescribeGroupsResponse {
    use describe_groups_response::*;
    let members = MEMBERS
        .iter()
        .map(|m| {
            let mut x = DescribedGroupMember::default()
                .with_member_id(s(m.id))
                .with_client_id(s(m.client_id))
                .with_client_host(s(m.client_host))
                .with_member_metadata(Bytes::from(subscription(m.topics)))
                .with_member_assignment(Bytes::from(assignment(m.assigned)));
            if v >= 4 {
                x.group_instance_id = m.instance.map(s);
            }
            x
        })
        .collect();
    let mut stable = DescribedGroup::default()
        .with_error_code(0)
        .with_group_id(s(GROUP).into())
        .with_group_state(s("Stable"))
        .with_protocol_type(s(PROTOCOL_TYPE))
        .with_protocol_data(s(ASSIGNOR))
        .with_members(members);
    // An unknown group: "Dead" without error before v6, GROUP_ID_NOT_FOUND with a message from
    // v6 (KIP-1043).
    let mut unknown = DescribedGroup::default()
        .with_group_id(s(UNKNOWN_GROUP).into())
        .with_protocol_type(s(""))
        .with_protocol_data(s(""))
        .with_members(vec![]);
    if v >= 6 {
        stable.error_message = None;
        unknown.error_code = ResponseError::GroupIdNotFound.code();
        unknown.error_message = Some(s(GROUP_NOT_FOUND_MSG));
        unknown.group_state = s("");
    } else {
        unknown.error_code = 0;
        unknown.group_state = s("Dead");
    }
    if v >= 3 {
        stable.authorized_operations = GROUP_OPS;
        unknown.authorized_operations = OPS_OMITTED;
    }
    let mut r = DescribeGroupsResponse::default().with_groups(vec![stable, unknown]);
    if v >= 1 {
        r.throttle_time_ms = THROTTLE;
    }
    r
}

/// ListGroups rows: (group id, protocol type, state [v4+], type [v5+]).
const LISTED: &[(&str, &str, &str, &str)] = &[
    (GROUP, PROTOCOL_TYPE, "Stable", "classic"),
    ("g-consumer", PROTOCOL_TYPE, "Reconciling", "consumer"),
    ("connect-cluster", "connect", "Empty", "classic"),
];

fn list_groups_response(v: i16) -> ListGroupsResponse {
    use list_groups_response::*;
    let groups = LISTED
        .iter()
        .map(|&(id, ptype, state, gtype)| {
            let mut g = ListedGroup::default()
                .with_group_id(s(id).into())
                .with_protocol_type(s(ptype));
            if v >= 4 {
                g.group_state = s(state);
            }
            if v >= 5 {
                g.group_type = s(gtype);
            }
            g
        })
        .collect();
    let mut r = ListGroupsResponse::default()
        .with_error_code(0)
        .with_groups(groups);
    if v >= 1 {
        r.throttle_time_ms = THROTTLE;
    }
    r
}

/// DeleteGroups results: deleted, NON_EMPTY_GROUP, GROUP_ID_NOT_FOUND.
const DELETED: &[(&str, i16)] = &[
    ("g-old", 0),
    (GROUP, ResponseError::NonEmptyGroup.code()),
    (UNKNOWN_GROUP, ResponseError::GroupIdNotFound.code()),
];

fn delete_groups_response(_v: i16) -> DeleteGroupsResponse {
    use delete_groups_response::*;
    DeleteGroupsResponse::default()
        .with_throttle_time_ms(THROTTLE)
        .with_results(
            DELETED
                .iter()
                .map(|&(g, e)| {
                    DeletableGroupResult::default()
                        .with_group_id(s(g).into())
                        .with_error_code(e)
                })
                .collect(),
        )
}

/// OffsetDelete: the group still subscribes to `orders` (GROUP_SUBSCRIBED_TO_TOPIC), not to
/// `audit-log`.
const OFFSETS_DELETED: &[(&str, &[(i32, i16)])] = &[
    (
        TOPIC,
        &[
            (0, ResponseError::GroupSubscribedToTopic.code()),
            (1, ResponseError::GroupSubscribedToTopic.code()),
        ],
    ),
    (AUDIT_TOPIC, &[(0, 0)]),
];

fn offset_delete_response(_v: i16) -> OffsetDeleteResponse {
    use offset_delete_response::*;
    OffsetDeleteResponse::default()
        .with_error_code(0)
        .with_throttle_time_ms(THROTTLE)
        .with_topics(
            OFFSETS_DELETED
                .iter()
                .map(|&(name, parts)| {
                    OffsetDeleteResponseTopic::default()
                        .with_name(s(name).into())
                        .with_partitions(
                            parts
                                .iter()
                                .map(|&(p, e)| {
                                    OffsetDeleteResponsePartition::default()
                                        .with_partition_index(p)
                                        .with_error_code(e)
                                })
                                .collect(),
                        )
                })
                .collect(),
        )
}

// ---------------------------------------------------------------------------------------------
// KIP-848: ConsumerGroupHeartbeat (68) and ConsumerGroupDescribe (69), both flexible from v0.

const CONSUMER_GROUP: &str = "g-consumer";
/// librdkafka makes its own 22-character member id (a base64 UUID, KIP-1082).
const CG_MEMBER_A: &str = "Yl1eY0sZQ8S3uJ2gq3b0Zw";
/// @platformatic/kafka uses a 36-character UUID string.
const CG_MEMBER_B: &str = "0f6c2b8e-1d4a-4c3b-9e7f-5a6b7c8d9e0f";
const CG_GROUP_EPOCH: i32 = 3;
const CG_HEARTBEAT_INTERVAL: i32 = 5000;
const CG_REBALANCE_TIMEOUT: i32 = 300_000;
const CG_ASSIGNOR: &str = "uniform";
const CG_REGEX: &str = "^(orders|audit-log)$";
const FENCED_MSG: &str = "The consumer group member has a greater epoch (5) than the one known \
                          by the group coordinator (3).";
const NOT_CONSUMER_GROUP_MSG: &str = "Group g-classic is not a consumer group.";

/// (topic id, topic name, partitions) of a KIP-848 assignment.
type CgTopic = ([u8; 16], &'static str, &'static [i32]);

/// The assignment the golden heartbeat hands to member A: two topics.
const CG_HEARTBEAT_ASSIGNMENT: &[CgTopic] = &[
    (TOPIC_ID, TOPIC, &[0, 1, 2]),
    (AUDIT_TOPIC_ID, AUDIT_TOPIC, &[0]),
];

/// One member of `CONSUMER_GROUP` as ConsumerGroupDescribe shows it.
struct CgMember {
    id: &'static str,
    instance: Option<&'static str>,
    rack: Option<&'static str>,
    epoch: i32,
    client_id: &'static str,
    client_host: &'static str,
    names: &'static [&'static str],
    regex: Option<&'static str>,
    assigned: &'static [CgTopic],
    target: &'static [CgTopic],
}

/// A Stable group at epoch 3: A (librdkafka, names) and B (static, regex subscription); current
/// assignments equal the targets, as in the seed's Example 2.
const CG_MEMBERS: [CgMember; 2] = [
    CgMember {
        id: CG_MEMBER_A,
        instance: None,
        rack: Some(RACK),
        epoch: CG_GROUP_EPOCH,
        client_id: "rdkafka",
        client_host: "/127.0.0.1",
        names: &[TOPIC],
        regex: None,
        assigned: &[(TOPIC_ID, TOPIC, &[0, 1, 2])],
        target: &[(TOPIC_ID, TOPIC, &[0, 1, 2])],
    },
    CgMember {
        id: CG_MEMBER_B,
        instance: Some("consumer-b-1"),
        rack: None,
        epoch: CG_GROUP_EPOCH,
        client_id: "consumer-g-consumer-2",
        client_host: "/10.0.0.7",
        names: &[],
        regex: Some(CG_REGEX),
        assigned: &[
            (TOPIC_ID, TOPIC, &[3, 4, 5]),
            (AUDIT_TOPIC_ID, AUDIT_TOPIC, &[0]),
        ],
        target: &[
            (TOPIC_ID, TOPIC, &[3, 4, 5]),
            (AUDIT_TOPIC_ID, AUDIT_TOPIC, &[0]),
        ],
    },
];

fn consumer_group_heartbeat_response(_v: i16) -> ConsumerGroupHeartbeatResponse {
    use consumer_group_heartbeat_response::*;
    // A's first heartbeat after the target moved: its member id, epoch and a two-topic assignment.
    ConsumerGroupHeartbeatResponse::default()
        .with_throttle_time_ms(THROTTLE)
        .with_error_code(0)
        .with_error_message(None)
        .with_member_id(Some(s(CG_MEMBER_A)))
        .with_member_epoch(CG_GROUP_EPOCH)
        .with_heartbeat_interval_ms(CG_HEARTBEAT_INTERVAL)
        .with_assignment(Some(
            Assignment::default().with_topic_partitions(
                CG_HEARTBEAT_ASSIGNMENT
                    .iter()
                    .map(|&(id, _, ps)| {
                        TopicPartitions::default()
                            .with_topic_id(uuid(id))
                            .with_partitions(ps.to_vec())
                    })
                    .collect(),
            ),
        ))
}

/// A zombie heartbeating with an epoch ahead of the coordinator's: FENCED_MEMBER_EPOCH with a
/// message, no member id, epoch and interval 0, null assignment (Kafka's error response).
fn consumer_group_heartbeat_error_response(_v: i16) -> ConsumerGroupHeartbeatResponse {
    ConsumerGroupHeartbeatResponse::default()
        .with_throttle_time_ms(THROTTLE)
        .with_error_code(ResponseError::FencedMemberEpoch.code())
        .with_error_message(Some(s(FENCED_MSG)))
        .with_member_id(None)
        .with_member_epoch(0)
        .with_heartbeat_interval_ms(0)
        .with_assignment(None)
}

fn consumer_group_describe_response(v: i16) -> ConsumerGroupDescribeResponse {
    use consumer_group_describe_response::*;
    let assignment = |topics: &[CgTopic]| {
        Assignment::default().with_topic_partitions(
            topics
                .iter()
                .map(|&(id, name, ps)| {
                    TopicPartitions::default()
                        .with_topic_id(uuid(id))
                        .with_topic_name(s(name).into())
                        .with_partitions(ps.to_vec())
                })
                .collect(),
        )
    };
    let members = CG_MEMBERS
        .iter()
        .map(|m| {
            let mut x = Member::default()
                .with_member_id(s(m.id))
                .with_instance_id(m.instance.map(s))
                .with_rack_id(m.rack.map(s))
                .with_member_epoch(m.epoch)
                .with_client_id(s(m.client_id))
                .with_client_host(s(m.client_host))
                .with_subscribed_topic_names(m.names.iter().map(|n| s(n).into()).collect())
                .with_subscribed_topic_regex(m.regex.map(s))
                .with_assignment(assignment(m.assigned))
                .with_target_assignment(assignment(m.target));
            if v >= 1 {
                x.member_type = 1; // consumer (KIP-1099); v0 keeps the default -1 off the wire
            }
            x
        })
        .collect();
    let not_found = |group: &str, msg: &str| {
        DescribedGroup::default()
            .with_error_code(ResponseError::GroupIdNotFound.code())
            .with_error_message(Some(s(msg)))
            .with_group_id(s(group).into())
            .with_group_state(s(""))
            .with_group_epoch(0)
            .with_assignment_epoch(0)
            .with_assignor_name(s(""))
            .with_members(vec![])
            .with_authorized_operations(OPS_OMITTED)
    };
    ConsumerGroupDescribeResponse::default()
        .with_throttle_time_ms(THROTTLE)
        .with_groups(vec![
            DescribedGroup::default()
                .with_error_code(0)
                .with_error_message(None)
                .with_group_id(s(CONSUMER_GROUP).into())
                .with_group_state(s("Stable"))
                .with_group_epoch(CG_GROUP_EPOCH)
                .with_assignment_epoch(CG_GROUP_EPOCH)
                .with_assignor_name(s(CG_ASSIGNOR))
                .with_members(members)
                .with_authorized_operations(GROUP_OPS),
            // A classic group: admin clients fall back to DescribeGroups for it.
            not_found(GROUP, NOT_CONSUMER_GROUP_MSG),
            not_found(UNKNOWN_GROUP, GROUP_NOT_FOUND_MSG),
        ])
}

// ---------------------------------------------------------------------------------------------
// The data path: Produce (0), DeleteRecords (21) and InitProducerId (22).

/// A compacted topic: a batch with keyless records is rejected on it (KIP-467's RecordErrors).
const COMPACTED_TOPIC: &str = "customer-profiles";
const COMPACTED_TOPIC_ID: [u8; 16] = [
    0x5e, 0x1a, 0x9b, 0x42, 0x0c, 0x7d, 0x4e, 0x33, 0xa8, 0x16, 0x2f, 0x90, 0x6b, 0xd4, 0x01, 0xe7,
];
/// The broker's clock when it appended to `audit-log` (`message.timestamp.type=LogAppendTime`).
const LOG_APPEND_TIME: i64 = 1_700_000_000_456;
const PRODUCER_ID: i64 = 4_001;
const PRODUCER_EPOCH: i16 = 2;
const TRANSACTIONAL_ID: &str = "tx-orders";
const NO_KEY_MSG: &str =
    "Compacted topic cannot accept message without key in topic partition customer-profiles-0.";
const RECORDS_REJECTED_MSG: &str =
    "One or more records have been rejected due to 2 record errors in total";

/// (partition, error code, base offset, log append time, log start offset) of a produce result.
type Produced = (i32, i16, i64, i64, i64);

/// `orders` (CreateTime, so LogAppendTimeMs is -1): p0 appended at the high watermark; p1 lost its
/// leadership (NOT_LEADER_OR_FOLLOWER), nothing appended.
const PRODUCED_ORDERS: [Produced; 2] = [
    (0, 0, HIGH_WATERMARK, -1, 0),
    (1, ResponseError::NotLeaderOrFollower.code(), -1, -1, -1),
];
/// `audit-log` (LogAppendTime): appended at offset 5; retention already removed offsets 0-1.
const PRODUCED_AUDIT: Produced = (0, 0, 5, LOG_APPEND_TIME, 2);
/// `customer-profiles` p0 (v8+): INVALID_RECORD, records 0 and 2 of the batch had no key.
const PRODUCED_REJECTED: Produced = (0, ResponseError::InvalidRecord.code(), -1, -1, -1);
/// The RecordErrors of `PRODUCED_REJECTED`: (batch index, message).
const RECORD_ERRORS: &[(i32, Option<&str>)] = &[(0, Some(NO_KEY_MSG)), (2, None)];

fn produce_response(v: i16) -> ProduceResponse {
    use produce_response::*;
    let part = |&(index, error, base_offset, append_time, log_start): &Produced| {
        let mut p = PartitionProduceResponse::default()
            .with_index(index)
            .with_error_code(error)
            .with_base_offset(base_offset)
            .with_log_append_time_ms(append_time);
        if v >= 5 {
            p.log_start_offset = log_start;
        }
        p
    };
    let topic = |name: &str, id: [u8; 16], partitions: Vec<PartitionProduceResponse>| {
        let mut t = TopicProduceResponse::default().with_partition_responses(partitions);
        if v <= 12 {
            t.name = s(name).into();
        } else {
            t.topic_id = uuid(id);
        }
        t
    };
    let mut orders: Vec<_> = PRODUCED_ORDERS.iter().map(part).collect();
    if v >= 10 {
        // KIP-951: the new leader of p1 rides along, and its endpoint at the top level.
        orders[1].current_leader = LeaderIdAndEpoch::default()
            .with_leader_id(BrokerId(NODE2))
            .with_leader_epoch(LEADER_EPOCH + 2);
    }
    let mut responses = vec![
        topic(TOPIC, TOPIC_ID, orders),
        topic(AUDIT_TOPIC, AUDIT_TOPIC_ID, vec![part(&PRODUCED_AUDIT)]),
    ];
    if v >= 8 {
        let rejected = part(&PRODUCED_REJECTED)
            .with_record_errors(
                RECORD_ERRORS
                    .iter()
                    .map(|&(i, msg)| {
                        BatchIndexAndErrorMessage::default()
                            .with_batch_index(i)
                            .with_batch_index_error_message(msg.map(s))
                    })
                    .collect(),
            )
            .with_error_message(Some(s(RECORDS_REJECTED_MSG)));
        responses.push(topic(COMPACTED_TOPIC, COMPACTED_TOPIC_ID, vec![rejected]));
    }
    let mut r = ProduceResponse::default()
        .with_responses(responses)
        .with_throttle_time_ms(THROTTLE);
    if v >= 10 {
        r.node_endpoints = vec![NodeEndpoint::default()
            .with_node_id(BrokerId(NODE2))
            .with_host(s(HOST2))
            .with_port(PORT)
            .with_rack(Some(s(RACK2)))];
    }
    r
}

/// (partition, low watermark, error code) of a DeleteRecords result.
type LowWatermark = (i32, i64, i16);

/// DeleteRecords results per topic. `orders` p0 now starts at 17; p1 was asked for an offset
/// beyond its high watermark (OFFSET_OUT_OF_RANGE); `ghost` does not exist
/// (UNKNOWN_TOPIC_OR_PARTITION).
const RECORDS_DELETED: &[(&str, &[LowWatermark])] = &[
    (
        TOPIC,
        &[(0, 17, 0), (1, -1, ResponseError::OffsetOutOfRange.code())],
    ),
    (
        "ghost",
        &[(0, -1, ResponseError::UnknownTopicOrPartition.code())],
    ),
];

fn delete_records_response(_v: i16) -> DeleteRecordsResponse {
    use delete_records_response::*;
    DeleteRecordsResponse::default()
        .with_throttle_time_ms(THROTTLE)
        .with_topics(
            RECORDS_DELETED
                .iter()
                .map(|&(name, parts)| {
                    DeleteRecordsTopicResult::default()
                        .with_name(s(name).into())
                        .with_partitions(
                            parts
                                .iter()
                                .map(|&(p, low, e)| {
                                    DeleteRecordsPartitionResult::default()
                                        .with_partition_index(p)
                                        .with_low_watermark(low)
                                        .with_error_code(e)
                                })
                                .collect(),
                        )
                })
                .collect(),
        )
}

/// A transactional producer (re-)initialised: its id and bumped epoch.
fn init_producer_id_response(_v: i16) -> InitProducerIdResponse {
    InitProducerIdResponse::default()
        .with_throttle_time_ms(THROTTLE)
        .with_error_code(0)
        .with_producer_id(ProducerId(PRODUCER_ID))
        .with_producer_epoch(PRODUCER_EPOCH)
}

/// The transaction coordinator is still completing the previous transaction of this id:
/// CONCURRENT_TRANSACTIONS with no producer id and epoch (-1, -1), as Kafka's error response.
fn init_producer_id_error_response(_v: i16) -> InitProducerIdResponse {
    InitProducerIdResponse::default()
        .with_throttle_time_ms(THROTTLE)
        .with_error_code(ResponseError::ConcurrentTransactions.code())
        .with_producer_id(ProducerId(-1))
        .with_producer_epoch(-1)
}

// ---------------------------------------------------------------------------------------------
// Transactions: AddPartitionsToTxn (24), AddOffsetsToTxn (25), EndTxn (26), TxnOffsetCommit (28),
// DescribeTransactions (65) and ListTransactions (66).

/// A second transactional producer, on `audit-log`.
const AUDIT_TRANSACTIONAL_ID: &str = "tx-audit";
const AUDIT_PRODUCER_ID: i64 = 4_002;
/// A transactional id the coordinator does not know.
const GHOST_TRANSACTIONAL_ID: &str = "tx-ghost";
const TXN_TIMEOUT_MS: i32 = 60_000;
/// When the ongoing transaction of `tx-orders` began (its first AddPartitionsToTxn).
const TXN_START_MS: i64 = 1_700_000_000_789;

/// (topic, [(partition, error code)]) of a per-partition transactional result.
type TxnTopicResult = (&'static str, &'static [(i32, i16)]);

/// AddPartitionsToTxn v0-3 (one producer's client request): `ghost` does not exist, so the
/// coordinator adds nothing and answers OPERATION_NOT_ATTEMPTED for the valid partitions, as Kafka.
const ADDED_PARTITIONS: &[TxnTopicResult] = &[
    (
        TOPIC,
        &[
            (0, ResponseError::OperationNotAttempted.code()),
            (1, ResponseError::OperationNotAttempted.code()),
        ],
    ),
    (
        "ghost",
        &[(0, ResponseError::UnknownTopicOrPartition.code())],
    ),
];

/// AddPartitionsToTxn v4+ (a broker's batched request), per transactional id: `tx-orders` got
/// both partitions, `tx-audit` is still completing its previous transaction.
const ADDED_BY_TRANSACTION: &[(&str, &[TxnTopicResult])] = &[
    (TRANSACTIONAL_ID, &[(TOPIC, &[(0, 0), (1, 0)])]),
    (
        AUDIT_TRANSACTIONAL_ID,
        &[(
            AUDIT_TOPIC,
            &[(0, ResponseError::ConcurrentTransactions.code())],
        )],
    ),
];

fn add_partitions_to_txn_response(v: i16) -> AddPartitionsToTxnResponse {
    use add_partitions_to_txn_response::*;
    let topics = |results: &[TxnTopicResult]| -> Vec<AddPartitionsToTxnTopicResult> {
        results
            .iter()
            .map(|&(name, parts)| {
                AddPartitionsToTxnTopicResult::default()
                    .with_name(s(name).into())
                    .with_results_by_partition(
                        parts
                            .iter()
                            .map(|&(p, e)| {
                                AddPartitionsToTxnPartitionResult::default()
                                    .with_partition_index(p)
                                    .with_partition_error_code(e)
                            })
                            .collect(),
                    )
            })
            .collect()
    };
    let mut r = AddPartitionsToTxnResponse::default().with_throttle_time_ms(THROTTLE);
    if v <= 3 {
        r.results_by_topic_v3_and_below = topics(ADDED_PARTITIONS);
    } else {
        r.error_code = 0;
        r.results_by_transaction = ADDED_BY_TRANSACTION
            .iter()
            .map(|&(id, results)| {
                AddPartitionsToTxnResult::default()
                    .with_transactional_id(s(id).into())
                    .with_topic_results(topics(results))
            })
            .collect();
    }
    r
}

/// The coordinator is still completing the previous transaction of `tx-orders`:
/// CONCURRENT_TRANSACTIONS (the producer retries the AddOffsetsToTxn).
fn add_offsets_to_txn_response(_v: i16) -> AddOffsetsToTxnResponse {
    AddOffsetsToTxnResponse::default()
        .with_throttle_time_ms(THROTTLE)
        .with_error_code(ResponseError::ConcurrentTransactions.code())
}

/// `tx-orders` committed; from v5 (KIP-890 part 2) the epoch is bumped on every transaction and
/// the new one is returned.
fn end_txn_response(v: i16) -> EndTxnResponse {
    let mut r = EndTxnResponse::default()
        .with_throttle_time_ms(THROTTLE)
        .with_error_code(0);
    if v >= 5 {
        r.producer_id = ProducerId(PRODUCER_ID);
        r.producer_epoch = PRODUCER_EPOCH + 1;
    }
    r
}

/// TxnOffsetCommit results: `orders` committed; `audit-log` p3 does not exist.
const TXN_COMMITTED: &[TxnTopicResult] = &[
    (TOPIC, &[(0, 0), (1, 0)]),
    (
        AUDIT_TOPIC,
        &[(3, ResponseError::UnknownTopicOrPartition.code())],
    ),
];

fn txn_offset_commit_response(_v: i16) -> TxnOffsetCommitResponse {
    use txn_offset_commit_response::*;
    TxnOffsetCommitResponse::default()
        .with_throttle_time_ms(THROTTLE)
        .with_topics(
            TXN_COMMITTED
                .iter()
                .map(|&(name, parts)| {
                    TxnOffsetCommitResponseTopic::default()
                        .with_name(s(name).into())
                        .with_partitions(
                            parts
                                .iter()
                                .map(|&(p, e)| {
                                    TxnOffsetCommitResponsePartition::default()
                                        .with_partition_index(p)
                                        .with_error_code(e)
                                })
                                .collect(),
                        )
                })
                .collect(),
        )
}

/// `tx-orders` is Ongoing on `orders` p0-1 and `audit-log` p0; `tx-ghost` is unknown
/// (TRANSACTIONAL_ID_NOT_FOUND, every other field left at its default, as Kafka).
fn describe_transactions_response(_v: i16) -> DescribeTransactionsResponse {
    use describe_transactions_response::*;
    let ongoing = TransactionState::default()
        .with_error_code(0)
        .with_transactional_id(s(TRANSACTIONAL_ID).into())
        .with_transaction_state(s("Ongoing"))
        .with_transaction_timeout_ms(TXN_TIMEOUT_MS)
        .with_transaction_start_time_ms(TXN_START_MS)
        .with_producer_id(ProducerId(PRODUCER_ID))
        .with_producer_epoch(PRODUCER_EPOCH)
        .with_topics(vec![
            TopicData::default()
                .with_topic(s(TOPIC).into())
                .with_partitions(vec![0, 1]),
            TopicData::default()
                .with_topic(s(AUDIT_TOPIC).into())
                .with_partitions(vec![0]),
        ]);
    let unknown = TransactionState::default()
        .with_error_code(ResponseError::TransactionalIdNotFound.code())
        .with_transactional_id(s(GHOST_TRANSACTIONAL_ID).into());
    DescribeTransactionsResponse::default()
        .with_throttle_time_ms(THROTTLE)
        .with_transaction_states(vec![ongoing, unknown])
}

/// (transactional id, producer id, state) of a listed transaction.
const LISTED_TRANSACTIONS: &[(&str, i64, &str)] = &[
    (TRANSACTIONAL_ID, PRODUCER_ID, "Ongoing"),
    (AUDIT_TRANSACTIONAL_ID, AUDIT_PRODUCER_ID, "CompleteCommit"),
];
/// A state filter the coordinator does not know, echoed back in UnknownStateFilters.
const UNKNOWN_TXN_STATE: &str = "Frozen";

/// DescribeUserScramCredentials: `alice` has both mechanisms, `ghost` does not exist
/// (RESOURCE_NOT_FOUND with Kafka's `ScramImage.describe` message, no credential infos).
fn describe_user_scram_credentials_response(_v: i16) -> DescribeUserScramCredentialsResponse {
    use describe_user_scram_credentials_response::*;
    DescribeUserScramCredentialsResponse::default()
        .with_throttle_time_ms(THROTTLE)
        .with_error_code(0)
        .with_error_message(None)
        .with_results(vec![
            DescribeUserScramCredentialsResult::default()
                .with_user(s("alice"))
                .with_error_code(0)
                .with_error_message(None)
                .with_credential_infos(vec![
                    CredentialInfo::default()
                        .with_mechanism(1)
                        .with_iterations(8192),
                    CredentialInfo::default()
                        .with_mechanism(2)
                        .with_iterations(4096),
                ]),
            DescribeUserScramCredentialsResult::default()
                .with_user(s("ghost"))
                .with_error_code(ResponseError::ResourceNotFound.code())
                .with_error_message(Some(s(SCRAM_GHOST_MESSAGE))),
        ])
}

const SCRAM_GHOST_MESSAGE: &str =
    "Attempt to describe a user credential that does not exist: ghost";

/// DescribeClientQuotas: v0 an INVALID_REQUEST with Kafka's `ClientQuotasImage.describe`
/// message and null entries (`DescribeClientQuotasRequest.getErrorResponse`), v1 the success
/// Ringleader always gives, no quotas being configured: an empty entries list.
fn describe_client_quotas_response(v: i16) -> DescribeClientQuotasResponse {
    let r = DescribeClientQuotasResponse::default().with_throttle_time_ms(THROTTLE);
    if v == 0 {
        r.with_error_code(ResponseError::InvalidRequest.code())
            .with_error_message(Some(s(CLIENT_QUOTAS_INVALID)))
            .with_entries(None)
    } else {
        r.with_error_code(0)
            .with_error_message(None)
            .with_entries(Some(vec![]))
    }
}

const CLIENT_QUOTAS_INVALID: &str =
    "Request specified MATCH_TYPE_EXACT, but set match string to null.";

/// AlterUserScramCredentials: `alice` upserted, `bob` refused (Kafka's "Too few iterations").
fn alter_user_scram_credentials_response(_v: i16) -> AlterUserScramCredentialsResponse {
    use alter_user_scram_credentials_response::*;
    AlterUserScramCredentialsResponse::default()
        .with_throttle_time_ms(THROTTLE)
        .with_results(vec![
            AlterUserScramCredentialsResult::default()
                .with_user(s("alice"))
                .with_error_code(0)
                .with_error_message(None),
            AlterUserScramCredentialsResult::default()
                .with_user(s("bob"))
                .with_error_code(ResponseError::UnacceptableCredential.code())
                .with_error_message(Some(s("Too few iterations"))),
        ])
}

/// UpdateFeatures in every served version: v0–1 a success listing its feature (Kafka's "NONE"
/// message), v2 a failure, which has no per-feature results.
fn update_features_response(v: i16) -> UpdateFeaturesResponse {
    use update_features_response::*;
    let r = UpdateFeaturesResponse::default().with_throttle_time_ms(THROTTLE);
    if v <= 1 {
        r.with_error_code(0)
            .with_error_message(None)
            .with_results(vec![UpdatableFeatureResult::default()
                .with_feature(s("transaction.version"))
                .with_error_code(0)
                .with_error_message(Some(s("NONE")))])
    } else {
        r.with_error_code(ResponseError::InvalidUpdateVersion.code())
            .with_error_message(Some(s(UPDATE_FEATURES_ERROR)))
    }
}

const UPDATE_FEATURES_ERROR: &str = "The update failed for all features since the following \
    feature had an error: Invalid update version 3 for feature transaction.version. Local \
    controller 1 only supports versions 0-2";

fn list_transactions_response(_v: i16) -> ListTransactionsResponse {
    use list_transactions_response::*;
    ListTransactionsResponse::default()
        .with_throttle_time_ms(THROTTLE)
        .with_error_code(0)
        .with_unknown_state_filters(vec![s(UNKNOWN_TXN_STATE)])
        .with_transaction_states(
            LISTED_TRANSACTIONS
                .iter()
                .map(|&(id, pid, state)| {
                    TransactionState::default()
                        .with_transactional_id(s(id).into())
                        .with_producer_id(ProducerId(pid))
                        .with_transaction_state(s(state))
                })
                .collect(),
        )
}

// ---------------------------------------------------------------------------------------------
// SaslHandshake (17) and SaslAuthenticate (36).

const SASL_MECHANISMS: &[&str] = &["PLAIN", "SCRAM-SHA-256"];
/// A SCRAM server-first message (what SaslAuthenticate carries mid-exchange).
const SCRAM_SERVER_FIRST: &[u8] =
    b"r=fyko+d2lbbFgONRv9qkxdawL3rfcNHYJY1ZVvWVs7j,s=QSXCR+Q6sek8bf92,i=4096";

/// A SaslHandshake answered for an enabled mechanism: the enabled list.
fn sasl_handshake_response(_v: i16) -> SaslHandshakeResponse {
    SaslHandshakeResponse::default()
        .with_error_code(0)
        .with_mechanisms(SASL_MECHANISMS.iter().map(|m| s(m)).collect())
}

/// A SaslAuthenticate success carrying the server's token and (v1+) the KIP-368 session lifetime.
fn sasl_authenticate_response(v: i16) -> SaslAuthenticateResponse {
    // The crate's default error message is "", Kafka's is null.
    let r = SaslAuthenticateResponse::default()
        .with_error_code(0)
        .with_error_message(None)
        .with_auth_bytes(Bytes::from_static(SCRAM_SERVER_FIRST));
    if v >= 1 {
        r.with_session_lifetime_ms(3_600_000)
    } else {
        r
    }
}

// SaslHandshakeResponse.json: validVersions 0-1, not flexible. ErrorCode, Mechanisms []string.
fn walk_sasl_handshake(frame: &[u8], v: i16) {
    let mut w = Walk::response(frame, format!("SaslHandshake v{v}"), false, false);
    w.expect_i16("error_code", 0);
    w.expect_array("mechanisms", SASL_MECHANISMS.len());
    for m in SASL_MECHANISMS {
        w.expect_str("mechanism", m);
    }
    w.end();
}

// SaslAuthenticateResponse.json: validVersions 0-2, flexible 2+. ErrorCode, ErrorMessage
// (nullable), AuthBytes (bytes), SessionLifetimeMs (int64, v1+).
fn walk_sasl_authenticate(frame: &[u8], v: i16) {
    let flex = v >= 2;
    let mut w = Walk::response(frame, format!("SaslAuthenticate v{v}"), flex, flex);
    w.expect_i16("error_code", 0);
    w.expect_nstr("error_message", None);
    w.expect_bytes("auth_bytes", SCRAM_SERVER_FIRST);
    if v >= 1 {
        w.expect_i64("session_lifetime_ms", 3_600_000);
    }
    if flex {
        w.expect_no_tags("top-level tags");
    }
    w.end();
}

// ---------------------------------------------------------------------------------------------
// DescribeProducers (61).

/// The producers of `orders` p0: (producer id, epoch, last sequence, last timestamp,
/// coordinator epoch, current transaction start offset). An idempotent producer (no marker yet,
/// so coordinator epoch -1, no transaction) and `tx-orders` in an open transaction.
const ACTIVE_PRODUCERS: &[(i64, i32, i32, i64, i32, i64)] = &[
    (3_001, 0, 41, 1_700_000_000_456, -1, -1),
    (
        PRODUCER_ID,
        PRODUCER_EPOCH as i32,
        6,
        TXN_START_MS,
        3,
        HIGH_WATERMARK - 7,
    ),
];
/// What Kafka's `Topic.validate` says about the name `bad topic` (`InvalidTopicException`).
const INVALID_TOPIC_NAME_MSG: &str = "Topic name is invalid: 'bad topic' contains one or more \
                                      characters other than ASCII alphanumerics, '.', '_' and '-'";

/// `orders` p0 with its producers and p9 (the topic has two partitions:
/// UNKNOWN_TOPIC_OR_PARTITION with no message, `ReplicaManager.getPartitionOrError`); an
/// unknown topic (the topic-level error, with its default message) and an invalid name
/// (INVALID_TOPIC_EXCEPTION with the validation message), as `KafkaApis` answers them.
fn describe_producers_response(_v: i16) -> DescribeProducersResponse {
    use describe_producers_response::*;
    let part = |index: i32, error: ResponseError, message: Option<&str>| {
        PartitionResponse::default()
            .with_partition_index(index)
            .with_error_code(error.code())
            .with_error_message(message.map(s))
    };
    let producers = ACTIVE_PRODUCERS
        .iter()
        .map(|&(pid, epoch, seq, ts, coordinator_epoch, txn_start)| {
            ProducerState::default()
                .with_producer_id(ProducerId(pid))
                .with_producer_epoch(epoch)
                .with_last_sequence(seq)
                .with_last_timestamp(ts)
                .with_coordinator_epoch(coordinator_epoch)
                .with_current_txn_start_offset(txn_start)
        })
        .collect();
    let ok = PartitionResponse::default()
        .with_partition_index(0)
        .with_error_code(0)
        .with_active_producers(producers);
    DescribeProducersResponse::default()
        .with_throttle_time_ms(THROTTLE)
        .with_topics(vec![
            TopicResponse::default()
                .with_name(s(TOPIC).into())
                .with_partitions(vec![
                    ok,
                    part(9, ResponseError::UnknownTopicOrPartition, None),
                ]),
            TopicResponse::default()
                .with_name(s("ghost").into())
                .with_partitions(vec![part(
                    0,
                    ResponseError::UnknownTopicOrPartition,
                    Some(UNKNOWN_TOPIC_MSG),
                )]),
            TopicResponse::default()
                .with_name(s("bad topic").into())
                .with_partitions(vec![part(
                    0,
                    ResponseError::InvalidTopicException,
                    Some(INVALID_TOPIC_NAME_MSG),
                )]),
        ])
}

// ---------------------------------------------------------------------------------------------
// An independent reader for the golden frames, from the Kafka schema rules:
// int16-length strings / int32-length arrays in classic versions; in flexible versions compact
// strings and arrays (unsigned varint length + 1, 0 = null) and a tagged-field section (count,
// then tag/size/bytes in ascending tag order) after every struct.

struct Walk<'a> {
    buf: &'a [u8],
    pos: usize,
    flex: bool,
    ctx: String,
}

impl<'a> Walk<'a> {
    /// Start on a response frame: check the length prefix, the correlation id and, for response
    /// header v1, the header's (empty) tagged-field section.
    fn response(frame: &'a [u8], ctx: String, header_v1: bool, flex: bool) -> Self {
        let mut w = Walk {
            buf: frame,
            pos: 0,
            flex,
            ctx,
        };
        let len = w.i32("frame length");
        assert_eq!(
            len as usize,
            frame.len() - 4,
            "{}: frame length prefix",
            w.ctx
        );
        w.expect_i32("correlation_id", CID);
        if header_v1 {
            w.expect_uvarint("response header tagged-field count", 0);
        }
        w
    }

    fn sub(buf: &'a [u8], ctx: String, flex: bool) -> Self {
        Walk {
            buf,
            pos: 0,
            flex,
            ctx,
        }
    }

    fn take(&mut self, n: usize, what: &str) -> &'a [u8] {
        assert!(
            self.buf.len() - self.pos >= n,
            "{}: `{what}` needs {n} bytes at offset {} but only {} remain",
            self.ctx,
            self.pos,
            self.buf.len() - self.pos
        );
        let out = &self.buf[self.pos..self.pos + n];
        self.pos += n;
        out
    }

    fn i8(&mut self, what: &str) -> i8 {
        self.take(1, what)[0] as i8
    }
    fn i16(&mut self, what: &str) -> i16 {
        i16::from_be_bytes(self.take(2, what).try_into().unwrap())
    }
    fn i32(&mut self, what: &str) -> i32 {
        i32::from_be_bytes(self.take(4, what).try_into().unwrap())
    }
    fn i64(&mut self, what: &str) -> i64 {
        i64::from_be_bytes(self.take(8, what).try_into().unwrap())
    }
    fn uvarint(&mut self, what: &str) -> u32 {
        let mut v: u32 = 0;
        for i in 0..5 {
            let b = self.take(1, what)[0];
            v |= u32::from(b & 0x7f) << (7 * i);
            if b & 0x80 == 0 {
                return v;
            }
        }
        panic!("{}: `{what}` varint longer than 5 bytes", self.ctx)
    }
    fn bool(&mut self, what: &str) -> bool {
        match self.take(1, what)[0] {
            0 => false,
            1 => true,
            b => panic!("{}: `{what}` is not a boolean byte: {b}", self.ctx),
        }
    }
    /// A string or nullable string (the encodings differ only for null).
    fn string(&mut self, what: &str) -> Option<String> {
        let len = if self.flex {
            match self.uvarint(what) {
                0 => return None,
                n => (n - 1) as usize,
            }
        } else {
            match self.i16(what) {
                -1 => return None,
                n if n < 0 => panic!("{}: `{what}` has length {n}", self.ctx),
                n => n as usize,
            }
        };
        let raw = self.take(len, what);
        Some(String::from_utf8(raw.to_vec()).expect("utf-8 string"))
    }
    /// A bytes or nullable bytes field (also `records`): int32 / compact length, -1 / 0 = null.
    fn nbytes(&mut self, what: &str) -> Option<&'a [u8]> {
        let len = if self.flex {
            match self.uvarint(what) {
                0 => return None,
                n => (n - 1) as usize,
            }
        } else {
            match self.i32(what) {
                -1 => return None,
                n if n < 0 => panic!("{}: `{what}` has length {n}", self.ctx),
                n => n as usize,
            }
        };
        Some(self.take(len, what))
    }
    /// An array length, `None` for a null array.
    fn array(&mut self, what: &str) -> Option<usize> {
        if self.flex {
            match self.uvarint(what) {
                0 => None,
                n => Some((n - 1) as usize),
            }
        } else {
            match self.i32(what) {
                -1 => None,
                n if n < 0 => panic!("{}: `{what}` has length {n}", self.ctx),
                n => Some(n as usize),
            }
        }
    }
    /// The tagged-field section of a struct (nothing in classic versions).
    fn tags(&mut self, what: &str) -> Vec<(u32, &'a [u8])> {
        if !self.flex {
            return Vec::new();
        }
        let n = self.uvarint(what);
        let mut out: Vec<(u32, &'a [u8])> = Vec::new();
        for _ in 0..n {
            let tag = self.uvarint(what);
            if let Some(&(prev, _)) = out.last() {
                assert!(tag > prev, "{}: `{what}` tags out of order", self.ctx);
            }
            let size = self.uvarint(what) as usize;
            out.push((tag, self.take(size, what)));
        }
        out
    }

    fn expect_i8(&mut self, what: &str, want: i8) {
        let at = self.pos;
        let got = self.i8(what);
        assert_eq!(got, want, "{}: `{what}` at offset {at}", self.ctx);
    }
    fn expect_i16(&mut self, what: &str, want: i16) {
        let at = self.pos;
        let got = self.i16(what);
        assert_eq!(got, want, "{}: `{what}` at offset {at}", self.ctx);
    }
    fn expect_u16(&mut self, what: &str, want: u16) {
        let at = self.pos;
        let got = u16::from_be_bytes(self.take(2, what).try_into().unwrap());
        assert_eq!(got, want, "{}: `{what}` at offset {at}", self.ctx);
    }
    fn expect_i32(&mut self, what: &str, want: i32) {
        let at = self.pos;
        let got = self.i32(what);
        assert_eq!(got, want, "{}: `{what}` at offset {at}", self.ctx);
    }
    fn expect_i64(&mut self, what: &str, want: i64) {
        let at = self.pos;
        let got = self.i64(what);
        assert_eq!(got, want, "{}: `{what}` at offset {at}", self.ctx);
    }
    fn expect_uvarint(&mut self, what: &str, want: u32) {
        let at = self.pos;
        let got = self.uvarint(what);
        assert_eq!(got, want, "{}: `{what}` at offset {at}", self.ctx);
    }
    fn expect_bool(&mut self, what: &str, want: bool) {
        let at = self.pos;
        let got = self.bool(what);
        assert_eq!(got, want, "{}: `{what}` at offset {at}", self.ctx);
    }
    fn expect_str(&mut self, what: &str, want: &str) {
        self.expect_nstr(what, Some(want));
    }
    fn expect_nstr(&mut self, what: &str, want: Option<&str>) {
        let at = self.pos;
        let got = self.string(what);
        assert_eq!(
            got.as_deref(),
            want,
            "{}: `{what}` at offset {at}",
            self.ctx
        );
    }
    fn expect_uuid(&mut self, what: &str, want: [u8; 16]) {
        let at = self.pos;
        let got = self.take(16, what);
        assert_eq!(got, &want[..], "{}: `{what}` at offset {at}", self.ctx);
    }
    fn expect_bytes(&mut self, what: &str, want: &[u8]) {
        self.expect_nbytes(what, Some(want));
    }
    fn expect_nbytes(&mut self, what: &str, want: Option<&[u8]>) {
        let at = self.pos;
        let got = self.nbytes(what);
        assert_eq!(got, want, "{}: `{what}` at offset {at}", self.ctx);
    }
    fn expect_array(&mut self, what: &str, want: usize) {
        self.expect_narray(what, Some(want));
    }
    fn expect_narray(&mut self, what: &str, want: Option<usize>) {
        let at = self.pos;
        let got = self.array(what);
        assert_eq!(got, want, "{}: `{what}` length at offset {at}", self.ctx);
    }
    fn expect_i32_array(&mut self, what: &str, want: &[i32]) {
        self.expect_array(what, want.len());
        for &x in want {
            self.expect_i32(what, x);
        }
    }
    fn expect_no_tags(&mut self, what: &str) {
        let at = self.pos;
        let tags = self.tags(what);
        assert!(
            tags.is_empty(),
            "{}: `{what}` at offset {at}: unexpected tagged fields {tags:?}",
            self.ctx
        );
    }
    fn end(self) {
        assert_eq!(
            self.pos,
            self.buf.len(),
            "{}: {} trailing bytes",
            self.ctx,
            self.buf.len() - self.pos
        );
    }
}

fn walk_metadata(frame: &[u8], v: i16) {
    let flex = v >= 9;
    let mut w = Walk::response(frame, format!("Metadata v{v}"), flex, flex);
    if v >= 3 {
        w.expect_i32("throttle_time_ms", THROTTLE);
    }
    w.expect_array("brokers", 1);
    w.expect_i32("brokers[0].node_id", NODE);
    w.expect_str("brokers[0].host", HOST);
    w.expect_i32("brokers[0].port", PORT);
    if v >= 1 {
        w.expect_nstr("brokers[0].rack", Some(RACK));
    }
    w.expect_no_tags("brokers[0] tags");
    if v >= 2 {
        w.expect_nstr("cluster_id", Some(CLUSTER_ID));
    }
    if v >= 1 {
        w.expect_i32("controller_id", NODE);
    }
    w.expect_array("topics", 1);
    w.expect_i16("topics[0].error_code", 0);
    w.expect_str("topics[0].name", TOPIC);
    if v >= 10 {
        w.expect_uuid("topics[0].topic_id", TOPIC_ID);
    }
    if v >= 1 {
        w.expect_bool("topics[0].is_internal", false);
    }
    w.expect_array("topics[0].partitions", 2);
    for i in 0..2 {
        w.expect_i16("partition.error_code", 0);
        w.expect_i32("partition.partition_index", i);
        w.expect_i32("partition.leader_id", NODE);
        if v >= 7 {
            w.expect_i32("partition.leader_epoch", LEADER_EPOCH + i);
        }
        w.expect_i32_array("partition.replica_nodes", &[NODE]);
        w.expect_i32_array("partition.isr_nodes", &[NODE]);
        if v >= 5 {
            w.expect_i32_array("partition.offline_replicas", &[]);
        }
        w.expect_no_tags("partition tags");
    }
    if v >= 8 {
        w.expect_i32("topics[0].topic_authorized_operations", TOPIC_OPS);
    }
    w.expect_no_tags("topics[0] tags");
    if (8..=10).contains(&v) {
        w.expect_i32("cluster_authorized_operations", CLUSTER_OPS);
    }
    if v >= 13 {
        w.expect_i16("error_code", 0);
    }
    w.expect_no_tags("top-level tags");
    w.end();
}

fn walk_find_coordinator(frame: &[u8], v: i16) {
    let flex = v >= 3;
    let mut w = Walk::response(frame, format!("FindCoordinator v{v}"), flex, flex);
    if v >= 1 {
        w.expect_i32("throttle_time_ms", THROTTLE);
    }
    if v <= 3 {
        w.expect_i16("error_code", 0);
        if v >= 1 {
            w.expect_nstr("error_message", None);
        }
        w.expect_i32("node_id", NODE);
        w.expect_str("host", HOST);
        w.expect_i32("port", PORT);
    } else {
        w.expect_array("coordinators", 3);
        for key in ["g-classic", "g-consumer"] {
            w.expect_str("coordinator.key", key);
            w.expect_i32("coordinator.node_id", NODE);
            w.expect_str("coordinator.host", HOST);
            w.expect_i32("coordinator.port", PORT);
            w.expect_i16("coordinator.error_code", 0);
            w.expect_nstr("coordinator.error_message", None);
            w.expect_no_tags("coordinator tags");
        }
        w.expect_str("coordinator.key", "g-offline");
        w.expect_i32("coordinator.node_id", -1);
        w.expect_str("coordinator.host", "");
        w.expect_i32("coordinator.port", -1);
        w.expect_i16(
            "coordinator.error_code",
            ResponseError::CoordinatorNotAvailable.code(),
        );
        w.expect_nstr("coordinator.error_message", Some(COORDINATOR_NA_MSG));
        w.expect_no_tags("coordinator tags");
    }
    w.expect_no_tags("top-level tags");
    w.end();
}

fn walk_api_versions(frame: &[u8], v: i16) {
    let flex = v >= 3;
    // ApiVersions responses always use response header v0, even when the body is flexible.
    let mut w = Walk::response(frame, format!("ApiVersions v{v}"), false, flex);
    w.expect_i16("error_code", 0);
    w.expect_array("api_keys", ADVERTISED.len());
    for &(k, min, max) in ADVERTISED {
        w.expect_i16("api_keys.api_key", k);
        w.expect_i16("api_keys.min_version", min);
        w.expect_i16("api_keys.max_version", max);
        w.expect_no_tags("api_keys tags");
    }
    if v >= 1 {
        w.expect_i32("throttle_time_ms", THROTTLE);
    }
    let tags = w.tags("top-level tags");
    if v < 3 {
        assert!(tags.is_empty());
        w.end();
        return;
    }
    // Tag 0 SupportedFeatures, 1 FinalizedFeaturesEpoch, 2 FinalizedFeatures; 3 ZkMigrationReady
    // is false (its default) and so absent.
    let ids: Vec<u32> = tags.iter().map(|t| t.0).collect();
    assert_eq!(ids, [0, 1, 2], "ApiVersions v{v}: tags present");
    let mut t = Walk::sub(
        tags[0].1,
        format!("ApiVersions v{v} SupportedFeatures"),
        true,
    );
    let mut supported = vec![];
    if v >= 4 {
        supported.push(("group.version", 0, 1));
    }
    supported.push(("metadata.version", 7, 27));
    t.expect_array("supported_features", supported.len());
    for (name, min, max) in supported {
        t.expect_str("supported.name", name);
        t.expect_i16("supported.min_version", min);
        t.expect_i16("supported.max_version", max);
        t.expect_no_tags("supported tags");
    }
    t.end();
    let mut t = Walk::sub(
        tags[1].1,
        format!("ApiVersions v{v} FinalizedFeaturesEpoch"),
        true,
    );
    t.expect_i64("finalized_features_epoch", FINALIZED_EPOCH);
    t.end();
    let mut t = Walk::sub(
        tags[2].1,
        format!("ApiVersions v{v} FinalizedFeatures"),
        true,
    );
    t.expect_array("finalized_features", 2);
    for (name, level) in [("group.version", 1), ("metadata.version", 27)] {
        t.expect_str("finalized.name", name);
        t.expect_i16("finalized.max_version_level", level);
        t.expect_i16("finalized.min_version_level", level);
        t.expect_no_tags("finalized tags");
    }
    t.end();
    w.end();
}

fn walk_create_topics(frame: &[u8], v: i16) {
    let flex = v >= 5;
    let mut w = Walk::response(frame, format!("CreateTopics v{v}"), flex, flex);
    w.expect_i32("throttle_time_ms", THROTTLE);
    w.expect_array("topics", 3);

    // orders: created.
    w.expect_str("topics[0].name", TOPIC);
    if v >= 7 {
        w.expect_uuid("topics[0].topic_id", TOPIC_ID);
    }
    w.expect_i16("topics[0].error_code", 0);
    w.expect_nstr("topics[0].error_message", None);
    if v >= 5 {
        w.expect_i32("topics[0].num_partitions", 2);
        w.expect_i16("topics[0].replication_factor", 1);
        w.expect_narray("topics[0].configs", Some(2));
        for (name, value, source) in [
            ("cleanup.policy", "delete", 5),
            ("retention.ms", "86400000", 1),
        ] {
            w.expect_str("config.name", name);
            w.expect_nstr("config.value", Some(value));
            w.expect_bool("config.read_only", false);
            w.expect_i8("config.config_source", source);
            w.expect_bool("config.is_sensitive", false);
            w.expect_no_tags("config tags");
        }
    }
    w.expect_no_tags("topics[0] tags");

    // audit-log: created, configs not describable (tagged TopicConfigErrorCode = 29).
    w.expect_str("topics[1].name", AUDIT_TOPIC);
    if v >= 7 {
        w.expect_uuid("topics[1].topic_id", AUDIT_TOPIC_ID);
    }
    w.expect_i16("topics[1].error_code", 0);
    w.expect_nstr("topics[1].error_message", None);
    if v >= 5 {
        w.expect_i32("topics[1].num_partitions", 1);
        w.expect_i16("topics[1].replication_factor", 1);
        w.expect_narray("topics[1].configs", None);
        let tags = w.tags("topics[1] tags");
        assert_eq!(tags.len(), 1, "CreateTopics v{v}: audit-log tags {tags:?}");
        assert_eq!(tags[0].0, 0, "TopicConfigErrorCode is tag 0");
        let mut t = Walk::sub(
            tags[0].1,
            format!("CreateTopics v{v} TopicConfigErrorCode"),
            true,
        );
        t.expect_i16(
            "topic_config_error_code",
            ResponseError::TopicAuthorizationFailed.code(),
        );
        t.end();
    }

    // bad topic: INVALID_TOPIC_EXCEPTION.
    w.expect_str("topics[2].name", "bad topic");
    if v >= 7 {
        w.expect_uuid("topics[2].topic_id", [0; 16]);
    }
    w.expect_i16(
        "topics[2].error_code",
        ResponseError::InvalidTopicException.code(),
    );
    w.expect_nstr("topics[2].error_message", Some(INVALID_TOPIC_MSG));
    if v >= 5 {
        w.expect_i32("topics[2].num_partitions", -1);
        w.expect_i16("topics[2].replication_factor", -1);
        w.expect_narray("topics[2].configs", None);
    }
    w.expect_no_tags("topics[2] tags");
    w.expect_no_tags("top-level tags");
    w.end();
}

fn walk_delete_topics(frame: &[u8], v: i16) {
    let flex = v >= 4;
    let mut w = Walk::response(frame, format!("DeleteTopics v{v}"), flex, flex);
    w.expect_i32("throttle_time_ms", THROTTLE);
    w.expect_array("responses", if v >= 6 { 3 } else { 2 });
    w.expect_nstr("responses[0].name", Some(TOPIC));
    if v >= 6 {
        w.expect_uuid("responses[0].topic_id", TOPIC_ID);
    }
    w.expect_i16("responses[0].error_code", 0);
    if v >= 5 {
        w.expect_nstr("responses[0].error_message", None);
    }
    w.expect_no_tags("responses[0] tags");
    w.expect_nstr("responses[1].name", Some("ghost"));
    if v >= 6 {
        w.expect_uuid("responses[1].topic_id", [0; 16]);
    }
    w.expect_i16(
        "responses[1].error_code",
        ResponseError::UnknownTopicOrPartition.code(),
    );
    if v >= 5 {
        w.expect_nstr("responses[1].error_message", Some(UNKNOWN_TOPIC_MSG));
    }
    w.expect_no_tags("responses[1] tags");
    if v >= 6 {
        w.expect_nstr("responses[2].name", None);
        w.expect_uuid("responses[2].topic_id", GHOST_TOPIC_ID);
        w.expect_i16(
            "responses[2].error_code",
            ResponseError::UnknownTopicId.code(),
        );
        w.expect_nstr("responses[2].error_message", Some(UNKNOWN_TOPIC_ID_MSG));
        w.expect_no_tags("responses[2] tags");
    }
    w.expect_no_tags("top-level tags");
    w.end();
}

fn walk_describe_configs(frame: &[u8], v: i16) {
    let flex = v >= 4;
    let mut w = Walk::response(frame, format!("DescribeConfigs v{v}"), flex, flex);
    w.expect_i32("throttle_time_ms", THROTTLE);
    w.expect_array("results", 2);
    struct Cfg {
        name: &'static str,
        value: Option<&'static str>,
        read_only: bool,
        source: i8,
        sensitive: bool,
        synonyms: &'static [(&'static str, &'static str, i8)],
        config_type: i8,
        doc: Option<&'static str>,
    }
    let results: [(i8, &str, [Cfg; 2]); 2] = [
        (
            2,
            TOPIC,
            [
                Cfg {
                    name: "cleanup.policy",
                    value: Some("delete"),
                    read_only: false,
                    source: 5,
                    sensitive: false,
                    synonyms: &[("log.cleanup.policy", "delete", 5)],
                    config_type: 7,
                    doc: Some(CLEANUP_DOC),
                },
                Cfg {
                    name: "retention.ms",
                    value: Some("86400000"),
                    read_only: false,
                    source: 1,
                    sensitive: false,
                    synonyms: &[
                        ("retention.ms", "86400000", 1),
                        ("log.retention.hours", "168", 5),
                    ],
                    config_type: 5,
                    doc: None,
                },
            ],
        ),
        (
            4,
            "1",
            [
                Cfg {
                    name: "log.retention.hours",
                    value: Some("168"),
                    read_only: true,
                    source: 4,
                    sensitive: false,
                    synonyms: &[("log.retention.hours", "168", 4)],
                    config_type: 3,
                    doc: Some(RETENTION_HOURS_DOC),
                },
                Cfg {
                    name: "ssl.keystore.password",
                    value: None,
                    read_only: true,
                    source: 4,
                    sensitive: true,
                    synonyms: &[],
                    config_type: 9,
                    doc: None,
                },
            ],
        ),
    ];
    for (rtype, rname, configs) in results {
        w.expect_i16("result.error_code", 0);
        w.expect_nstr("result.error_message", None);
        w.expect_i8("result.resource_type", rtype);
        w.expect_str("result.resource_name", rname);
        w.expect_array("result.configs", configs.len());
        for c in configs {
            w.expect_str("config.name", c.name);
            w.expect_nstr("config.value", c.value);
            w.expect_bool("config.read_only", c.read_only);
            w.expect_i8("config.config_source", c.source);
            w.expect_bool("config.is_sensitive", c.sensitive);
            w.expect_array("config.synonyms", c.synonyms.len());
            for &(name, value, source) in c.synonyms {
                w.expect_str("synonym.name", name);
                w.expect_nstr("synonym.value", Some(value));
                w.expect_i8("synonym.source", source);
                w.expect_no_tags("synonym tags");
            }
            if v >= 3 {
                w.expect_i8("config.config_type", c.config_type);
                w.expect_nstr("config.documentation", c.doc);
            }
            w.expect_no_tags("config tags");
        }
        w.expect_no_tags("result tags");
    }
    w.expect_no_tags("top-level tags");
    w.end();
}

fn walk_describe_cluster(frame: &[u8], v: i16) {
    // Flexible from v0.
    let mut w = Walk::response(frame, format!("DescribeCluster v{v}"), true, true);
    w.expect_i32("throttle_time_ms", THROTTLE);
    w.expect_i16("error_code", 0);
    w.expect_nstr("error_message", None);
    if v >= 1 {
        w.expect_i8("endpoint_type", 1);
    }
    w.expect_str("cluster_id", CLUSTER_ID);
    w.expect_i32("controller_id", NODE);
    w.expect_array("brokers", 1);
    w.expect_i32("brokers[0].broker_id", NODE);
    w.expect_str("brokers[0].host", HOST);
    w.expect_i32("brokers[0].port", PORT);
    w.expect_nstr("brokers[0].rack", Some(RACK));
    if v >= 2 {
        w.expect_bool("brokers[0].is_fenced", false);
    }
    w.expect_no_tags("brokers[0] tags");
    w.expect_i32("cluster_authorized_operations", CLUSTER_OPS);
    w.expect_no_tags("top-level tags");
    w.end();
}

// AlterConfigsResponse.json (validVersions 0-2, flexible 2+) and
// IncrementalAlterConfigsResponse.json (validVersions 0-1, flexible 1+) share one body:
// ThrottleTimeMs, Responses[]{ErrorCode, ErrorMessage (nullable 0+), ResourceType (int8),
// ResourceName}. No tagged fields are defined.
fn walk_config_resource_responses(frame: &[u8], ctx: String, flex: bool, want: &[ConfigResult]) {
    let mut w = Walk::response(frame, ctx, flex, flex);
    w.expect_i32("throttle_time_ms", THROTTLE);
    w.expect_array("responses", want.len());
    for &(e, msg, rtype, rname) in want {
        w.expect_i16("response.error_code", e);
        w.expect_nstr("response.error_message", msg);
        w.expect_i8("response.resource_type", rtype);
        w.expect_str("response.resource_name", rname);
        w.expect_no_tags("response tags");
    }
    w.expect_no_tags("top-level tags");
    w.end();
}

fn walk_alter_configs(frame: &[u8], v: i16) {
    walk_config_resource_responses(frame, format!("AlterConfigs v{v}"), v >= 2, ALTERED_CONFIGS);
}

fn walk_incremental_alter_configs(frame: &[u8], v: i16) {
    walk_config_resource_responses(
        frame,
        format!("IncrementalAlterConfigs v{v}"),
        v >= 1,
        INCREMENTALLY_ALTERED,
    );
}

// CreatePartitionsResponse.json: validVersions 0-3, flexible 2+. ThrottleTimeMs,
// Results[]{Name, ErrorCode, ErrorMessage (nullable 0+)}. No tagged fields are defined.
fn walk_create_partitions(frame: &[u8], v: i16) {
    let flex = v >= 2;
    let mut w = Walk::response(frame, format!("CreatePartitions v{v}"), flex, flex);
    w.expect_i32("throttle_time_ms", THROTTLE);
    let want: &[PartitionsResult] = if v >= 3 {
        &[
            PARTITIONS_CREATED[0],
            PARTITIONS_CREATED[1],
            PARTITIONS_CREATED[2],
            PARTITIONS_THROTTLED,
        ]
    } else {
        PARTITIONS_CREATED
    };
    w.expect_array("results", want.len());
    for &(name, e, msg) in want {
        w.expect_str("result.name", name);
        w.expect_i16("result.error_code", e);
        w.expect_nstr("result.error_message", msg);
        w.expect_no_tags("result tags");
    }
    w.expect_no_tags("top-level tags");
    w.end();
}

// FetchResponse.json: validVersions 4-18, flexible 12+. Topic[0-12] / TopicId[13+]; partition
// tags 0 DivergingEpoch, 1 CurrentLeader, 2 SnapshotId (12+); top-level tag 0 NodeEndpoints (16+).
fn walk_fetch(frame: &[u8], v: i16) {
    let flex = v >= 12;
    let mut w = Walk::response(frame, format!("Fetch v{v}"), flex, flex);
    w.expect_i32("throttle_time_ms", THROTTLE);
    if v >= 7 {
        w.expect_i16("error_code", 0);
        w.expect_i32("session_id", FETCH_SESSION);
    }
    w.expect_array("responses", 1);
    if v <= 12 {
        w.expect_str("responses[0].topic", TOPIC);
    } else {
        w.expect_uuid("responses[0].topic_id", TOPIC_ID);
    }
    w.expect_array("responses[0].partitions", 2);

    w.expect_i32("p0.partition_index", 0);
    w.expect_i16("p0.error_code", 0);
    w.expect_i64("p0.high_watermark", HIGH_WATERMARK);
    w.expect_i64("p0.last_stable_offset", HIGH_WATERMARK);
    if v >= 5 {
        w.expect_i64("p0.log_start_offset", 0);
    }
    w.expect_narray("p0.aborted_transactions", Some(0));
    if v >= 11 {
        w.expect_i32("p0.preferred_read_replica", NODE2);
    }
    w.expect_nbytes("p0.records", Some(&[]));
    w.expect_no_tags("p0 tags");

    w.expect_i32("p1.partition_index", 1);
    w.expect_i16("p1.error_code", ResponseError::NotLeaderOrFollower.code());
    w.expect_i64("p1.high_watermark", -1);
    w.expect_i64("p1.last_stable_offset", -1);
    if v >= 5 {
        w.expect_i64("p1.log_start_offset", -1);
    }
    w.expect_narray("p1.aborted_transactions", None);
    if v >= 11 {
        w.expect_i32("p1.preferred_read_replica", -1);
    }
    w.expect_nbytes("p1.records", Some(&[]));
    if flex {
        let tags = w.tags("p1 tags");
        let ids: Vec<u32> = tags.iter().map(|t| t.0).collect();
        assert_eq!(
            ids,
            [1],
            "Fetch v{v}: p1 carries only CurrentLeader (tag 1)"
        );
        let mut t = Walk::sub(tags[0].1, format!("Fetch v{v} p1.CurrentLeader"), true);
        t.expect_i32("current_leader.leader_id", NODE2);
        t.expect_i32("current_leader.leader_epoch", LEADER_EPOCH + 2);
        t.expect_no_tags("current_leader tags");
        t.end();
    }
    w.expect_no_tags("responses[0] tags");
    if v >= 16 {
        let tags = w.tags("top-level tags");
        let ids: Vec<u32> = tags.iter().map(|t| t.0).collect();
        assert_eq!(ids, [0], "Fetch v{v}: NodeEndpoints is top-level tag 0");
        let mut t = Walk::sub(tags[0].1, format!("Fetch v{v} NodeEndpoints"), true);
        t.expect_array("node_endpoints", 1);
        t.expect_i32("node_endpoints[0].node_id", NODE2);
        t.expect_str("node_endpoints[0].host", HOST2);
        t.expect_i32("node_endpoints[0].port", PORT);
        t.expect_nstr("node_endpoints[0].rack", Some(RACK2));
        t.expect_no_tags("node_endpoints[0] tags");
        t.end();
    } else {
        w.expect_no_tags("top-level tags");
    }
    w.end();
}

// ListOffsetsResponse.json: validVersions 1-11 (crate: 1-10), flexible 6+.
fn walk_list_offsets(frame: &[u8], v: i16) {
    let flex = v >= 6;
    let mut w = Walk::response(frame, format!("ListOffsets v{v}"), flex, flex);
    if v >= 2 {
        w.expect_i32("throttle_time_ms", THROTTLE);
    }
    w.expect_array("topics", 2);
    // (partition, error, timestamp, offset, leader epoch)
    type Listed = (i32, i16, i64, i64, i32);
    let topics: [(&str, &[Listed]); 2] = [
        (
            TOPIC,
            &[
                (0, 0, -1, HIGH_WATERMARK, LEADER_EPOCH),
                (1, 0, FOUND_TIMESTAMP, 17, LEADER_EPOCH + 1),
            ],
        ),
        (
            "ghost",
            &[(0, ResponseError::UnknownTopicOrPartition.code(), -1, -1, -1)],
        ),
    ];
    for (name, parts) in topics {
        w.expect_str("topic.name", name);
        w.expect_array("topic.partitions", parts.len());
        for &(index, error, timestamp, offset, epoch) in parts {
            w.expect_i32("partition.partition_index", index);
            w.expect_i16("partition.error_code", error);
            w.expect_i64("partition.timestamp", timestamp);
            w.expect_i64("partition.offset", offset);
            if v >= 4 {
                w.expect_i32("partition.leader_epoch", epoch);
            }
            w.expect_no_tags("partition tags");
        }
        w.expect_no_tags("topic tags");
    }
    w.expect_no_tags("top-level tags");
    w.end();
}

// OffsetCommitResponse.json: validVersions 2-10 (served 2-9), flexible 8+; Name [0-9].
fn walk_offset_commit(frame: &[u8], v: i16) {
    let flex = v >= 8;
    let mut w = Walk::response(frame, format!("OffsetCommit v{v}"), flex, flex);
    if v >= 3 {
        w.expect_i32("throttle_time_ms", THROTTLE);
    }
    let topics: [(&str, &[(i32, i16)]); 2] = [
        (TOPIC, &[(0, 0), (1, 0)]),
        (
            AUDIT_TOPIC,
            &[
                (0, ResponseError::OffsetMetadataTooLarge.code()),
                (3, ResponseError::UnknownTopicOrPartition.code()),
            ],
        ),
    ];
    w.expect_array("topics", topics.len());
    for (name, parts) in topics {
        w.expect_str("topic.name", name);
        w.expect_array("topic.partitions", parts.len());
        for &(p, e) in parts {
            w.expect_i32("partition.partition_index", p);
            w.expect_i16("partition.error_code", e);
            w.expect_no_tags("partition tags");
        }
        w.expect_no_tags("topic tags");
    }
    w.expect_no_tags("top-level tags");
    w.end();
}

// OffsetFetchResponse.json: validVersions 1-10 (served 1-9), flexible 6+. Topics[0-7] with
// CommittedLeaderEpoch[5-7] and top-level ErrorCode[2-7]; Groups[8+].
fn walk_offset_fetch(frame: &[u8], v: i16) {
    let flex = v >= 6;
    let mut w = Walk::response(frame, format!("OffsetFetch v{v}"), flex, flex);
    if v >= 3 {
        w.expect_i32("throttle_time_ms", THROTTLE);
    }
    let committed = |w: &mut Walk, with_epoch: bool| {
        w.expect_array("topics", COMMITTED.len());
        for &(name, parts) in COMMITTED {
            w.expect_str("topic.name", name);
            w.expect_array("topic.partitions", parts.len());
            for &(p, offset, epoch, meta) in parts {
                w.expect_i32("partition.partition_index", p);
                w.expect_i64("partition.committed_offset", offset);
                if with_epoch {
                    w.expect_i32("partition.committed_leader_epoch", epoch);
                }
                w.expect_nstr("partition.metadata", Some(meta));
                w.expect_i16("partition.error_code", 0);
                w.expect_no_tags("partition tags");
            }
            w.expect_no_tags("topic tags");
        }
    };
    if v <= 7 {
        committed(&mut w, v >= 5);
        if v >= 2 {
            w.expect_i16("error_code", 0);
        }
    } else {
        w.expect_array("groups", 2);
        w.expect_str("groups[0].group_id", GROUP);
        committed(&mut w, true);
        w.expect_i16("groups[0].error_code", 0);
        w.expect_no_tags("groups[0] tags");
        w.expect_str("groups[1].group_id", LOADING_GROUP);
        w.expect_array("groups[1].topics", 0);
        w.expect_i16(
            "groups[1].error_code",
            ResponseError::CoordinatorLoadInProgress.code(),
        );
        w.expect_no_tags("groups[1] tags");
    }
    w.expect_no_tags("top-level tags");
    w.end();
}

// JoinGroupResponse.json: validVersions 0-9, flexible 6+. ThrottleTimeMs[2+],
// ProtocolType?[7+], ProtocolName (nullable 7+), SkipAssignment[9+], member GroupInstanceId?[5+].
fn walk_join_group(frame: &[u8], v: i16) {
    let flex = v >= 6;
    let mut w = Walk::response(frame, format!("JoinGroup v{v}"), flex, flex);
    if v >= 2 {
        w.expect_i32("throttle_time_ms", THROTTLE);
    }
    w.expect_i16("error_code", 0);
    w.expect_i32("generation_id", GENERATION);
    if v >= 7 {
        w.expect_nstr("protocol_type", Some(PROTOCOL_TYPE));
    }
    w.expect_nstr("protocol_name", Some(ASSIGNOR));
    w.expect_str("leader", MEMBERS[0].id);
    if v >= 9 {
        w.expect_bool("skip_assignment", true);
    }
    w.expect_str("member_id", MEMBERS[0].id);
    w.expect_array("members", MEMBERS.len());
    for m in &MEMBERS {
        w.expect_str("member.member_id", m.id);
        if v >= 5 {
            w.expect_nstr("member.group_instance_id", m.instance);
        }
        w.expect_bytes("member.metadata", &subscription(m.topics));
        w.expect_no_tags("member tags");
    }
    w.expect_no_tags("top-level tags");
    w.end();
}

// HeartbeatResponse.json: validVersions 0-4, flexible 4+.
fn walk_heartbeat(frame: &[u8], v: i16) {
    let flex = v >= 4;
    let mut w = Walk::response(frame, format!("Heartbeat v{v}"), flex, flex);
    if v >= 1 {
        w.expect_i32("throttle_time_ms", THROTTLE);
    }
    w.expect_i16("error_code", ResponseError::RebalanceInProgress.code());
    w.expect_no_tags("top-level tags");
    w.end();
}

// LeaveGroupResponse.json: validVersions 0-5, flexible 4+; Members[3+].
fn walk_leave_group(frame: &[u8], v: i16) {
    let flex = v >= 4;
    let mut w = Walk::response(frame, format!("LeaveGroup v{v}"), flex, flex);
    if v >= 1 {
        w.expect_i32("throttle_time_ms", THROTTLE);
    }
    if v <= 2 {
        w.expect_i16("error_code", ResponseError::UnknownMemberId.code());
    } else {
        w.expect_i16("error_code", 0);
        w.expect_array("members", 2);
        w.expect_str("members[0].member_id", MEMBERS[0].id);
        w.expect_nstr("members[0].group_instance_id", MEMBERS[0].instance);
        w.expect_i16("members[0].error_code", 0);
        w.expect_no_tags("members[0] tags");
        w.expect_str("members[1].member_id", "");
        w.expect_nstr("members[1].group_instance_id", Some("consumer-c-9"));
        w.expect_i16(
            "members[1].error_code",
            ResponseError::UnknownMemberId.code(),
        );
        w.expect_no_tags("members[1] tags");
    }
    w.expect_no_tags("top-level tags");
    w.end();
}

// SyncGroupResponse.json: validVersions 0-5, flexible 4+; ProtocolType?/ProtocolName?[5+].
fn walk_sync_group(frame: &[u8], v: i16) {
    let flex = v >= 4;
    let mut w = Walk::response(frame, format!("SyncGroup v{v}"), flex, flex);
    if v >= 1 {
        w.expect_i32("throttle_time_ms", THROTTLE);
    }
    w.expect_i16("error_code", 0);
    if v >= 5 {
        w.expect_nstr("protocol_type", Some(PROTOCOL_TYPE));
        w.expect_nstr("protocol_name", Some(ASSIGNOR));
    }
    w.expect_bytes("assignment", &assignment(MEMBERS[0].assigned));
    w.expect_no_tags("top-level tags");
    w.end();
}

// DescribeGroupsResponse.json: validVersions 0-6, flexible 5+. ErrorMessage?[6+] after
// ErrorCode; member GroupInstanceId?[4+]; AuthorizedOperations[3+].
fn walk_describe_groups(frame: &[u8], v: i16) {
    let flex = v >= 5;
    let mut w = Walk::response(frame, format!("DescribeGroups v{v}"), flex, flex);
    if v >= 1 {
        w.expect_i32("throttle_time_ms", THROTTLE);
    }
    w.expect_array("groups", 2);

    w.expect_i16("groups[0].error_code", 0);
    if v >= 6 {
        w.expect_nstr("groups[0].error_message", None);
    }
    w.expect_str("groups[0].group_id", GROUP);
    w.expect_str("groups[0].group_state", "Stable");
    w.expect_str("groups[0].protocol_type", PROTOCOL_TYPE);
    w.expect_str("groups[0].protocol_data", ASSIGNOR);
    w.expect_array("groups[0].members", MEMBERS.len());
    for m in &MEMBERS {
        w.expect_str("member.member_id", m.id);
        if v >= 4 {
            w.expect_nstr("member.group_instance_id", m.instance);
        }
        w.expect_str("member.client_id", m.client_id);
        w.expect_str("member.client_host", m.client_host);
        w.expect_bytes("member.member_metadata", &subscription(m.topics));
        w.expect_bytes("member.member_assignment", &assignment(m.assigned));
        w.expect_no_tags("member tags");
    }
    if v >= 3 {
        w.expect_i32("groups[0].authorized_operations", GROUP_OPS);
    }
    w.expect_no_tags("groups[0] tags");

    if v >= 6 {
        w.expect_i16(
            "groups[1].error_code",
            ResponseError::GroupIdNotFound.code(),
        );
        w.expect_nstr("groups[1].error_message", Some(GROUP_NOT_FOUND_MSG));
    } else {
        w.expect_i16("groups[1].error_code", 0);
    }
    w.expect_str("groups[1].group_id", UNKNOWN_GROUP);
    w.expect_str("groups[1].group_state", if v >= 6 { "" } else { "Dead" });
    w.expect_str("groups[1].protocol_type", "");
    w.expect_str("groups[1].protocol_data", "");
    w.expect_array("groups[1].members", 0);
    if v >= 3 {
        w.expect_i32("groups[1].authorized_operations", OPS_OMITTED);
    }
    w.expect_no_tags("groups[1] tags");
    w.expect_no_tags("top-level tags");
    w.end();
}

// ListGroupsResponse.json: validVersions 0-5, flexible 3+; GroupState[4+], GroupType[5+].
fn walk_list_groups(frame: &[u8], v: i16) {
    let flex = v >= 3;
    let mut w = Walk::response(frame, format!("ListGroups v{v}"), flex, flex);
    if v >= 1 {
        w.expect_i32("throttle_time_ms", THROTTLE);
    }
    w.expect_i16("error_code", 0);
    w.expect_array("groups", LISTED.len());
    for &(id, ptype, state, gtype) in LISTED {
        w.expect_str("group.group_id", id);
        w.expect_str("group.protocol_type", ptype);
        if v >= 4 {
            w.expect_str("group.group_state", state);
        }
        if v >= 5 {
            w.expect_str("group.group_type", gtype);
        }
        w.expect_no_tags("group tags");
    }
    w.expect_no_tags("top-level tags");
    w.end();
}

// DeleteGroupsResponse.json: validVersions 0-3 (crate: 0-2), flexible 2+; ThrottleTimeMs[0+].
fn walk_delete_groups(frame: &[u8], v: i16) {
    let flex = v >= 2;
    let mut w = Walk::response(frame, format!("DeleteGroups v{v}"), flex, flex);
    w.expect_i32("throttle_time_ms", THROTTLE);
    w.expect_array("results", DELETED.len());
    for &(g, e) in DELETED {
        w.expect_str("result.group_id", g);
        w.expect_i16("result.error_code", e);
        w.expect_no_tags("result tags");
    }
    w.expect_no_tags("top-level tags");
    w.end();
}

// OffsetDeleteResponse.json: validVersions 0, flexible none; ErrorCode before ThrottleTimeMs.
fn walk_offset_delete(frame: &[u8], v: i16) {
    let mut w = Walk::response(frame, format!("OffsetDelete v{v}"), false, false);
    w.expect_i16("error_code", 0);
    w.expect_i32("throttle_time_ms", THROTTLE);
    w.expect_array("topics", OFFSETS_DELETED.len());
    for &(name, parts) in OFFSETS_DELETED {
        w.expect_str("topic.name", name);
        w.expect_array("topic.partitions", parts.len());
        for &(p, e) in parts {
            w.expect_i32("partition.partition_index", p);
            w.expect_i16("partition.error_code", e);
        }
    }
    w.end();
}

// ConsumerGroupHeartbeatResponse.json: validVersions 0-1, flexible 0+. Assignment is a nullable
// struct (int8 -1 = null, 1 = present) of TopicPartitions[]{TopicId, Partitions[]}.
fn walk_consumer_group_heartbeat(frame: &[u8], v: i16) {
    let mut w = Walk::response(frame, format!("ConsumerGroupHeartbeat v{v}"), true, true);
    w.expect_i32("throttle_time_ms", THROTTLE);
    w.expect_i16("error_code", 0);
    w.expect_nstr("error_message", None);
    w.expect_nstr("member_id", Some(CG_MEMBER_A));
    w.expect_i32("member_epoch", CG_GROUP_EPOCH);
    w.expect_i32("heartbeat_interval_ms", CG_HEARTBEAT_INTERVAL);
    w.expect_i8("assignment (present)", 1);
    w.expect_array("assignment.topic_partitions", CG_HEARTBEAT_ASSIGNMENT.len());
    for &(id, _, ps) in CG_HEARTBEAT_ASSIGNMENT {
        w.expect_uuid("topic_partitions.topic_id", id);
        w.expect_i32_array("topic_partitions.partitions", ps);
        w.expect_no_tags("topic_partitions tags");
    }
    w.expect_no_tags("assignment tags");
    w.expect_no_tags("top-level tags");
    w.end();
}

fn walk_consumer_group_heartbeat_error(frame: &[u8], v: i16) {
    let mut w = Walk::response(
        frame,
        format!("ConsumerGroupHeartbeat v{v} (error)"),
        true,
        true,
    );
    w.expect_i32("throttle_time_ms", THROTTLE);
    w.expect_i16("error_code", ResponseError::FencedMemberEpoch.code());
    w.expect_nstr("error_message", Some(FENCED_MSG));
    w.expect_nstr("member_id", None);
    w.expect_i32("member_epoch", 0);
    w.expect_i32("heartbeat_interval_ms", 0);
    w.expect_i8("assignment (null)", -1);
    w.expect_no_tags("top-level tags");
    w.end();
}

// ConsumerGroupDescribeResponse.json (4.1): validVersions 0-1, flexible 0+. Member: MemberId
// (string), InstanceId?, RackId?, MemberEpoch, ClientId, ClientHost, SubscribedTopicNames[],
// SubscribedTopicRegex?, Assignment, TargetAssignment (non-null structs of
// TopicPartitions[]{TopicId, TopicName, Partitions[]}), MemberType:int8[1+].
fn walk_consumer_group_describe(frame: &[u8], v: i16) {
    let mut w = Walk::response(frame, format!("ConsumerGroupDescribe v{v}"), true, true);
    w.expect_i32("throttle_time_ms", THROTTLE);
    w.expect_array("groups", 3);

    w.expect_i16("groups[0].error_code", 0);
    w.expect_nstr("groups[0].error_message", None);
    w.expect_str("groups[0].group_id", CONSUMER_GROUP);
    w.expect_str("groups[0].group_state", "Stable");
    w.expect_i32("groups[0].group_epoch", CG_GROUP_EPOCH);
    w.expect_i32("groups[0].assignment_epoch", CG_GROUP_EPOCH);
    w.expect_str("groups[0].assignor_name", CG_ASSIGNOR);
    w.expect_array("groups[0].members", CG_MEMBERS.len());
    let walk_assignment = |w: &mut Walk, what: &str, topics: &[CgTopic]| {
        w.expect_array(what, topics.len());
        for &(id, name, ps) in topics {
            w.expect_uuid("topic_partitions.topic_id", id);
            w.expect_str("topic_partitions.topic_name", name);
            w.expect_i32_array("topic_partitions.partitions", ps);
            w.expect_no_tags("topic_partitions tags");
        }
        w.expect_no_tags("assignment tags");
    };
    for m in &CG_MEMBERS {
        w.expect_str("member.member_id", m.id);
        w.expect_nstr("member.instance_id", m.instance);
        w.expect_nstr("member.rack_id", m.rack);
        w.expect_i32("member.member_epoch", m.epoch);
        w.expect_str("member.client_id", m.client_id);
        w.expect_str("member.client_host", m.client_host);
        w.expect_array("member.subscribed_topic_names", m.names.len());
        for n in m.names {
            w.expect_str("member.subscribed_topic_names[]", n);
        }
        w.expect_nstr("member.subscribed_topic_regex", m.regex);
        walk_assignment(&mut w, "member.assignment.topic_partitions", m.assigned);
        walk_assignment(
            &mut w,
            "member.target_assignment.topic_partitions",
            m.target,
        );
        if v >= 1 {
            w.expect_i8("member.member_type", 1);
        }
        w.expect_no_tags("member tags");
    }
    w.expect_i32("groups[0].authorized_operations", GROUP_OPS);
    w.expect_no_tags("groups[0] tags");

    for (i, group, msg) in [
        (1, GROUP, NOT_CONSUMER_GROUP_MSG),
        (2, UNKNOWN_GROUP, GROUP_NOT_FOUND_MSG),
    ] {
        w.expect_i16(&format!("groups[{i}].error_code"), 69);
        w.expect_nstr(&format!("groups[{i}].error_message"), Some(msg));
        w.expect_str(&format!("groups[{i}].group_id"), group);
        w.expect_str(&format!("groups[{i}].group_state"), "");
        w.expect_i32(&format!("groups[{i}].group_epoch"), 0);
        w.expect_i32(&format!("groups[{i}].assignment_epoch"), 0);
        w.expect_str(&format!("groups[{i}].assignor_name"), "");
        w.expect_array(&format!("groups[{i}].members"), 0);
        w.expect_i32(&format!("groups[{i}].authorized_operations"), OPS_OMITTED);
        w.expect_no_tags(&format!("groups[{i}] tags"));
    }
    w.expect_no_tags("top-level tags");
    w.end();
}

// ProduceResponse.json: validVersions 3-13, flexible 9+. Responses[]{Name[0-12] | TopicId[13+],
// PartitionResponses[]{Index, ErrorCode, BaseOffset, LogAppendTimeMs[2+], LogStartOffset[5+],
// RecordErrors[8+][]{BatchIndex, BatchIndexErrorMessage (nullable)}, ErrorMessage (nullable
// 8+), tag 0 CurrentLeader[10+]{LeaderId, LeaderEpoch}}}, then ThrottleTimeMs[1+] (after the
// responses, unlike most APIs), top-level tag 0 NodeEndpoints[10+][]{NodeId, Host, Port, Rack?}.
fn walk_produce(frame: &[u8], v: i16) {
    let flex = v >= 9;
    let mut w = Walk::response(frame, format!("Produce v{v}"), flex, flex);
    let topic_key = |w: &mut Walk, name: &str, id: [u8; 16]| {
        if v <= 12 {
            w.expect_str("topic.name", name);
        } else {
            w.expect_uuid("topic.topic_id", id);
        }
    };
    // Everything of a partition up to its tagged fields.
    let partition = |w: &mut Walk, &(index, error, base, append, log_start): &Produced| {
        w.expect_i32("partition.index", index);
        w.expect_i16("partition.error_code", error);
        w.expect_i64("partition.base_offset", base);
        w.expect_i64("partition.log_append_time_ms", append);
        if v >= 5 {
            w.expect_i64("partition.log_start_offset", log_start);
        }
    };
    // An accepted or unreplicated partition: no record errors, null message.
    let no_record_errors = |w: &mut Walk| {
        if v >= 8 {
            w.expect_array("partition.record_errors", 0);
            w.expect_nstr("partition.error_message", None);
        }
    };
    w.expect_array("responses", if v >= 8 { 3 } else { 2 });

    topic_key(&mut w, TOPIC, TOPIC_ID);
    w.expect_array("orders.partition_responses", 2);
    partition(&mut w, &PRODUCED_ORDERS[0]);
    no_record_errors(&mut w);
    w.expect_no_tags("orders p0 tags");
    partition(&mut w, &PRODUCED_ORDERS[1]);
    no_record_errors(&mut w);
    if v >= 10 {
        let tags = w.tags("orders p1 tags");
        let ids: Vec<u32> = tags.iter().map(|t| t.0).collect();
        assert_eq!(ids, [0], "Produce v{v}: p1 carries CurrentLeader (tag 0)");
        let mut t = Walk::sub(tags[0].1, format!("Produce v{v} p1.CurrentLeader"), true);
        t.expect_i32("current_leader.leader_id", NODE2);
        t.expect_i32("current_leader.leader_epoch", LEADER_EPOCH + 2);
        t.expect_no_tags("current_leader tags");
        t.end();
    } else {
        w.expect_no_tags("orders p1 tags");
    }
    w.expect_no_tags("orders tags");

    topic_key(&mut w, AUDIT_TOPIC, AUDIT_TOPIC_ID);
    w.expect_array("audit-log.partition_responses", 1);
    partition(&mut w, &PRODUCED_AUDIT);
    no_record_errors(&mut w);
    w.expect_no_tags("audit-log p0 tags");
    w.expect_no_tags("audit-log tags");

    if v >= 8 {
        topic_key(&mut w, COMPACTED_TOPIC, COMPACTED_TOPIC_ID);
        w.expect_array("customer-profiles.partition_responses", 1);
        partition(&mut w, &PRODUCED_REJECTED);
        w.expect_array("partition.record_errors", RECORD_ERRORS.len());
        for &(index, msg) in RECORD_ERRORS {
            w.expect_i32("record_error.batch_index", index);
            w.expect_nstr("record_error.batch_index_error_message", msg);
            w.expect_no_tags("record_error tags");
        }
        w.expect_nstr("partition.error_message", Some(RECORDS_REJECTED_MSG));
        w.expect_no_tags("customer-profiles p0 tags");
        w.expect_no_tags("customer-profiles tags");
    }

    w.expect_i32("throttle_time_ms", THROTTLE);
    if v >= 10 {
        let tags = w.tags("top-level tags");
        let ids: Vec<u32> = tags.iter().map(|t| t.0).collect();
        assert_eq!(ids, [0], "Produce v{v}: NodeEndpoints is top-level tag 0");
        let mut t = Walk::sub(tags[0].1, format!("Produce v{v} NodeEndpoints"), true);
        t.expect_array("node_endpoints", 1);
        t.expect_i32("node_endpoints[0].node_id", NODE2);
        t.expect_str("node_endpoints[0].host", HOST2);
        t.expect_i32("node_endpoints[0].port", PORT);
        t.expect_nstr("node_endpoints[0].rack", Some(RACK2));
        t.expect_no_tags("node_endpoints[0] tags");
        t.end();
    } else {
        w.expect_no_tags("top-level tags");
    }
    w.end();
}

// DeleteRecordsResponse.json: validVersions 0-2, flexible 2+. ThrottleTimeMs, Topics[]{Name,
// Partitions[]{PartitionIndex, LowWatermark, ErrorCode}}.
fn walk_delete_records(frame: &[u8], v: i16) {
    let flex = v >= 2;
    let mut w = Walk::response(frame, format!("DeleteRecords v{v}"), flex, flex);
    w.expect_i32("throttle_time_ms", THROTTLE);
    w.expect_array("topics", RECORDS_DELETED.len());
    for &(name, parts) in RECORDS_DELETED {
        w.expect_str("topic.name", name);
        w.expect_array("topic.partitions", parts.len());
        for &(p, low, e) in parts {
            w.expect_i32("partition.partition_index", p);
            w.expect_i64("partition.low_watermark", low);
            w.expect_i16("partition.error_code", e);
            w.expect_no_tags("partition tags");
        }
        w.expect_no_tags("topic tags");
    }
    w.expect_no_tags("top-level tags");
    w.end();
}

// InitProducerIdResponse.json: validVersions 0-6 (served 0-5), flexible 2+. ThrottleTimeMs,
// ErrorCode, ProducerId (int64), ProducerEpoch (int16); OngoingTxnProducerId/Epoch only in v6.
fn walk_init_producer_id_with(frame: &[u8], v: i16, ctx: &str, error: i16, id: i64, epoch: i16) {
    let flex = v >= 2;
    let mut w = Walk::response(frame, format!("InitProducerId v{v}{ctx}"), flex, flex);
    w.expect_i32("throttle_time_ms", THROTTLE);
    w.expect_i16("error_code", error);
    w.expect_i64("producer_id", id);
    w.expect_i16("producer_epoch", epoch);
    w.expect_no_tags("top-level tags");
    w.end();
}

fn walk_init_producer_id(frame: &[u8], v: i16) {
    walk_init_producer_id_with(frame, v, "", 0, PRODUCER_ID, PRODUCER_EPOCH);
}

fn walk_init_producer_id_error(frame: &[u8], v: i16) {
    walk_init_producer_id_with(
        frame,
        v,
        " (error)",
        ResponseError::ConcurrentTransactions.code(),
        -1,
        -1,
    );
}

/// Topic results of the shape {Name, Partitions[]{PartitionIndex, ErrorCode}}, one tagged-field
/// section per struct in flexible versions (AddPartitionsToTxnTopicResult, TxnOffsetCommit topics).
fn walk_txn_topic_results(w: &mut Walk<'_>, what: &str, want: &[TxnTopicResult]) {
    w.expect_array(what, want.len());
    for &(name, parts) in want {
        w.expect_str("topic.name", name);
        w.expect_array("topic.partitions", parts.len());
        for &(p, e) in parts {
            w.expect_i32("partition.partition_index", p);
            w.expect_i16("partition.error_code", e);
            w.expect_no_tags("partition tags");
        }
        w.expect_no_tags("topic tags");
    }
}

// AddPartitionsToTxnResponse.json: validVersions 0-5, flexible 3+. ThrottleTimeMs; ErrorCode[4+],
// ResultsByTransaction[4+]{TransactionalId, TopicResults[]}; ResultsByTopicV3AndBelow[0-3]. Both
// lists hold AddPartitionsToTxnTopicResult{Name, ResultsByPartition[]{PartitionIndex,
// PartitionErrorCode}}.
fn walk_add_partitions_to_txn(frame: &[u8], v: i16) {
    let flex = v >= 3;
    let mut w = Walk::response(frame, format!("AddPartitionsToTxn v{v}"), flex, flex);
    w.expect_i32("throttle_time_ms", THROTTLE);
    if v >= 4 {
        w.expect_i16("error_code", 0);
        w.expect_array("results_by_transaction", ADDED_BY_TRANSACTION.len());
        for &(id, results) in ADDED_BY_TRANSACTION {
            w.expect_str("result.transactional_id", id);
            walk_txn_topic_results(&mut w, "result.topic_results", results);
            w.expect_no_tags("result tags");
        }
    } else {
        walk_txn_topic_results(&mut w, "results_by_topic_v3_and_below", ADDED_PARTITIONS);
    }
    w.expect_no_tags("top-level tags");
    w.end();
}

// AddOffsetsToTxnResponse.json: validVersions 0-4, flexible 3+. ThrottleTimeMs, ErrorCode.
fn walk_add_offsets_to_txn(frame: &[u8], v: i16) {
    let flex = v >= 3;
    let mut w = Walk::response(frame, format!("AddOffsetsToTxn v{v}"), flex, flex);
    w.expect_i32("throttle_time_ms", THROTTLE);
    w.expect_i16("error_code", ResponseError::ConcurrentTransactions.code());
    w.expect_no_tags("top-level tags");
    w.end();
}

// EndTxnResponse.json: validVersions 0-5, flexible 3+. ThrottleTimeMs, ErrorCode; ProducerId
// (int64) and ProducerEpoch (int16) only in v5+.
fn walk_end_txn(frame: &[u8], v: i16) {
    let flex = v >= 3;
    let mut w = Walk::response(frame, format!("EndTxn v{v}"), flex, flex);
    w.expect_i32("throttle_time_ms", THROTTLE);
    w.expect_i16("error_code", 0);
    if v >= 5 {
        w.expect_i64("producer_id", PRODUCER_ID);
        w.expect_i16("producer_epoch", PRODUCER_EPOCH + 1);
    }
    w.expect_no_tags("top-level tags");
    w.end();
}

// TxnOffsetCommitResponse.json: validVersions 0-5 (v5, KIP-890 part 2, "the same as version 3"),
// flexible 3+. ThrottleTimeMs, Topics[]{Name, Partitions[]{PartitionIndex,
// ErrorCode}}.
fn walk_txn_offset_commit(frame: &[u8], v: i16) {
    let flex = v >= 3;
    let mut w = Walk::response(frame, format!("TxnOffsetCommit v{v}"), flex, flex);
    w.expect_i32("throttle_time_ms", THROTTLE);
    walk_txn_topic_results(&mut w, "topics", TXN_COMMITTED);
    w.expect_no_tags("top-level tags");
    w.end();
}

// DescribeTransactionsResponse.json: validVersions 0, flexible 0+. ThrottleTimeMs,
// TransactionStates[]{ErrorCode, TransactionalId, TransactionState, TransactionTimeoutMs (int32),
// TransactionStartTimeMs (int64), ProducerId (int64), ProducerEpoch (int16), Topics[]{Topic,
// Partitions []int32}}.
fn walk_describe_transactions(frame: &[u8], v: i16) {
    let mut w = Walk::response(frame, format!("DescribeTransactions v{v}"), true, true);
    w.expect_i32("throttle_time_ms", THROTTLE);
    w.expect_array("transaction_states", 2);
    w.expect_i16("state.error_code", 0);
    w.expect_str("state.transactional_id", TRANSACTIONAL_ID);
    w.expect_str("state.transaction_state", "Ongoing");
    w.expect_i32("state.transaction_timeout_ms", TXN_TIMEOUT_MS);
    w.expect_i64("state.transaction_start_time_ms", TXN_START_MS);
    w.expect_i64("state.producer_id", PRODUCER_ID);
    w.expect_i16("state.producer_epoch", PRODUCER_EPOCH);
    w.expect_array("state.topics", 2);
    w.expect_str("topic.topic", TOPIC);
    w.expect_i32_array("topic.partitions", &[0, 1]);
    w.expect_no_tags("topic tags");
    w.expect_str("topic.topic", AUDIT_TOPIC);
    w.expect_i32_array("topic.partitions", &[0]);
    w.expect_no_tags("topic tags");
    w.expect_no_tags("state tags");
    // The unknown id: only ErrorCode and TransactionalId are set.
    w.expect_i16(
        "state.error_code",
        ResponseError::TransactionalIdNotFound.code(),
    );
    w.expect_str("state.transactional_id", GHOST_TRANSACTIONAL_ID);
    w.expect_str("state.transaction_state", "");
    w.expect_i32("state.transaction_timeout_ms", 0);
    w.expect_i64("state.transaction_start_time_ms", 0);
    w.expect_i64("state.producer_id", 0);
    w.expect_i16("state.producer_epoch", 0);
    w.expect_array("state.topics", 0);
    w.expect_no_tags("state tags");
    w.expect_no_tags("top-level tags");
    w.end();
}

// UpdateFeaturesResponse.json: validVersions 0-2, flexible 0+. ThrottleTimeMs, ErrorCode,
// ErrorMessage (nullable), Results[]{Feature, ErrorCode, ErrorMessage (nullable)} (v0-1 only).
fn walk_update_features(frame: &[u8], v: i16) {
    let mut w = Walk::response(frame, format!("UpdateFeatures v{v}"), true, true);
    w.expect_i32("throttle_time_ms", THROTTLE);
    if v <= 1 {
        w.expect_i16("error_code", 0);
        w.expect_nstr("error_message", None);
        w.expect_array("results", 1);
        w.expect_str("result.feature", "transaction.version");
        w.expect_i16("result.error_code", 0);
        w.expect_nstr("result.error_message", Some("NONE"));
        w.expect_no_tags("result tags");
    } else {
        w.expect_i16("error_code", ResponseError::InvalidUpdateVersion.code());
        w.expect_nstr("error_message", Some(UPDATE_FEATURES_ERROR));
    }
    w.expect_no_tags("top-level tags");
    w.end();
}

// DescribeUserScramCredentialsResponse.json: validVersions 0, flexible 0+. ThrottleTimeMs,
// ErrorCode, ErrorMessage, Results[]{User, ErrorCode, ErrorMessage, CredentialInfos[]{Mechanism
// (int8), Iterations (int32)}}.
fn walk_describe_user_scram_credentials(frame: &[u8], v: i16) {
    let mut w = Walk::response(
        frame,
        format!("DescribeUserScramCredentials v{v}"),
        true,
        true,
    );
    w.expect_i32("throttle_time_ms", THROTTLE);
    w.expect_i16("error_code", 0);
    w.expect_nstr("error_message", None);
    w.expect_array("results", 2);
    w.expect_str("result.user", "alice");
    w.expect_i16("result.error_code", 0);
    w.expect_nstr("result.error_message", None);
    w.expect_array("result.credential_infos", 2);
    w.expect_i8("info.mechanism", 1);
    w.expect_i32("info.iterations", 8192);
    w.expect_no_tags("info tags");
    w.expect_i8("info.mechanism", 2);
    w.expect_i32("info.iterations", 4096);
    w.expect_no_tags("info tags");
    w.expect_no_tags("result tags");
    w.expect_str("result.user", "ghost");
    w.expect_i16("result.error_code", ResponseError::ResourceNotFound.code());
    w.expect_nstr("result.error_message", Some(SCRAM_GHOST_MESSAGE));
    w.expect_array("result.credential_infos", 0);
    w.expect_no_tags("result tags");
    w.expect_no_tags("top-level tags");
    w.end();
}

// DescribeClientQuotasResponse.json: validVersions 0-1, flexible 1+. ThrottleTimeMs, ErrorCode,
// ErrorMessage (nullable), Entries (nullable) []{Entity[]{EntityType, EntityName (nullable)},
// Values[]{Key, Value (float64)}}.
fn walk_describe_client_quotas(frame: &[u8], v: i16) {
    let flex = v >= 1;
    let mut w = Walk::response(frame, format!("DescribeClientQuotas v{v}"), flex, flex);
    w.expect_i32("throttle_time_ms", THROTTLE);
    if v == 0 {
        w.expect_i16("error_code", ResponseError::InvalidRequest.code());
        w.expect_nstr("error_message", Some(CLIENT_QUOTAS_INVALID));
        w.expect_narray("entries", None);
    } else {
        w.expect_i16("error_code", 0);
        w.expect_nstr("error_message", None);
        w.expect_narray("entries", Some(0));
        w.expect_no_tags("top-level tags");
    }
    w.end();
}

// AlterUserScramCredentialsResponse.json: validVersions 0, flexible 0+. ThrottleTimeMs,
// Results[]{User, ErrorCode, ErrorMessage}.
fn walk_alter_user_scram_credentials(frame: &[u8], v: i16) {
    let mut w = Walk::response(frame, format!("AlterUserScramCredentials v{v}"), true, true);
    w.expect_i32("throttle_time_ms", THROTTLE);
    w.expect_array("results", 2);
    w.expect_str("result.user", "alice");
    w.expect_i16("result.error_code", 0);
    w.expect_nstr("result.error_message", None);
    w.expect_no_tags("result tags");
    w.expect_str("result.user", "bob");
    w.expect_i16(
        "result.error_code",
        ResponseError::UnacceptableCredential.code(),
    );
    w.expect_nstr("result.error_message", Some("Too few iterations"));
    w.expect_no_tags("result tags");
    w.expect_no_tags("top-level tags");
    w.end();
}

// ListTransactionsResponse.json: validVersions 0-2 (v1 KIP-994 and v2 KIP-1152 change only the
// request), flexible 0+. ThrottleTimeMs, ErrorCode,
// UnknownStateFilters []string, TransactionStates[]{TransactionalId, ProducerId (int64),
// TransactionState}.
fn walk_list_transactions(frame: &[u8], v: i16) {
    let mut w = Walk::response(frame, format!("ListTransactions v{v}"), true, true);
    w.expect_i32("throttle_time_ms", THROTTLE);
    w.expect_i16("error_code", 0);
    w.expect_array("unknown_state_filters", 1);
    w.expect_str("unknown_state_filters[0]", UNKNOWN_TXN_STATE);
    w.expect_array("transaction_states", LISTED_TRANSACTIONS.len());
    for &(id, pid, state) in LISTED_TRANSACTIONS {
        w.expect_str("state.transactional_id", id);
        w.expect_i64("state.producer_id", pid);
        w.expect_str("state.transaction_state", state);
        w.expect_no_tags("state tags");
    }
    w.expect_no_tags("top-level tags");
    w.end();
}

// ---------------------------------------------------------------------------------------------
// DescribeAcls (29), CreateAcls (30), DeleteAcls (31).

/// The ACL every ACL golden carries: User:alice may READ topics prefixed `orders` from anywhere
/// (resource type TOPIC 2, pattern PREFIXED 4, operation READ 3, permission ALLOW 3).
const ACL_PRINCIPAL: &str = "User:alice";
const INVALID_CLUSTER_MSG: &str = "The only valid name for the CLUSTER resource is kafka-cluster";

/// One resource with one ACL (what `kafka-acls --list` shows).
fn describe_acls_response(_v: i16) -> DescribeAclsResponse {
    use describe_acls_response::*;
    DescribeAclsResponse::default()
        .with_throttle_time_ms(THROTTLE)
        .with_error_code(0)
        .with_error_message(None)
        .with_resources(vec![DescribeAclsResource::default()
            .with_resource_type(2)
            .with_resource_name(s("orders"))
            .with_pattern_type(4)
            .with_acls(vec![AclDescription::default()
                .with_principal(s(ACL_PRINCIPAL))
                .with_host(s("*"))
                .with_operation(3)
                .with_permission_type(3)])])
}

// DescribeAclsResponse.json: validVersions 0-3 (4.x serves 1-3), flexible 2+. ThrottleTimeMs,
// ErrorCode, ErrorMessage (nullable), Resources[]{ResourceType (int8), ResourceName,
// PatternType (int8, v1+), Acls[]{Principal, Host, Operation (int8), PermissionType (int8)}}.
fn walk_describe_acls(frame: &[u8], v: i16) {
    let flex = v >= 2;
    let mut w = Walk::response(frame, format!("DescribeAcls v{v}"), flex, flex);
    w.expect_i32("throttle_time_ms", THROTTLE);
    w.expect_i16("error_code", 0);
    w.expect_nstr("error_message", None);
    w.expect_array("resources", 1);
    w.expect_i8("resource.resource_type", 2);
    w.expect_str("resource.resource_name", "orders");
    w.expect_i8("resource.pattern_type", 4);
    w.expect_array("resource.acls", 1);
    w.expect_str("acl.principal", ACL_PRINCIPAL);
    w.expect_str("acl.host", "*");
    w.expect_i8("acl.operation", 3);
    w.expect_i8("acl.permission_type", 3);
    if flex {
        w.expect_no_tags("acl tags");
        w.expect_no_tags("resource tags");
        w.expect_no_tags("top-level tags");
    }
    w.end();
}

/// A created ACL, then one refused (a CLUSTER resource not named kafka-cluster).
fn create_acls_response(_v: i16) -> CreateAclsResponse {
    use create_acls_response::*;
    CreateAclsResponse::default()
        .with_throttle_time_ms(THROTTLE)
        .with_results(vec![
            AclCreationResult::default().with_error_message(None),
            AclCreationResult::default()
                .with_error_code(ResponseError::InvalidRequest.code())
                .with_error_message(Some(s(INVALID_CLUSTER_MSG))),
        ])
}

// CreateAclsResponse.json: validVersions 0-3 (4.x serves 1-3), flexible 2+. ThrottleTimeMs,
// Results[]{ErrorCode, ErrorMessage (nullable)}.
fn walk_create_acls(frame: &[u8], v: i16) {
    let flex = v >= 2;
    let mut w = Walk::response(frame, format!("CreateAcls v{v}"), flex, flex);
    w.expect_i32("throttle_time_ms", THROTTLE);
    w.expect_array("results", 2);
    w.expect_i16("result.error_code", 0);
    w.expect_nstr("result.error_message", None);
    if flex {
        w.expect_no_tags("result tags");
    }
    w.expect_i16("result.error_code", ResponseError::InvalidRequest.code());
    w.expect_nstr("result.error_message", Some(INVALID_CLUSTER_MSG));
    if flex {
        w.expect_no_tags("result tags");
        w.expect_no_tags("top-level tags");
    }
    w.end();
}

/// One filter that removed the golden ACL.
fn delete_acls_response(_v: i16) -> DeleteAclsResponse {
    use delete_acls_response::*;
    DeleteAclsResponse::default()
        .with_throttle_time_ms(THROTTLE)
        .with_filter_results(vec![DeleteAclsFilterResult::default()
            .with_error_message(None)
            .with_matching_acls(vec![DeleteAclsMatchingAcl::default()
                .with_error_message(None)
                .with_resource_type(2)
                .with_resource_name(s("orders"))
                .with_pattern_type(4)
                .with_principal(s(ACL_PRINCIPAL))
                .with_host(s("*"))
                .with_operation(3)
                .with_permission_type(3)])])
}

// DeleteAclsResponse.json: validVersions 0-3 (4.x serves 1-3), flexible 2+. ThrottleTimeMs,
// FilterResults[]{ErrorCode, ErrorMessage (nullable), MatchingAcls[]{ErrorCode, ErrorMessage
// (nullable), ResourceType (int8), ResourceName, PatternType (int8, v1+), Principal, Host,
// Operation (int8), PermissionType (int8)}}.
fn walk_delete_acls(frame: &[u8], v: i16) {
    let flex = v >= 2;
    let mut w = Walk::response(frame, format!("DeleteAcls v{v}"), flex, flex);
    w.expect_i32("throttle_time_ms", THROTTLE);
    w.expect_array("filter_results", 1);
    w.expect_i16("filter.error_code", 0);
    w.expect_nstr("filter.error_message", None);
    w.expect_array("filter.matching_acls", 1);
    w.expect_i16("acl.error_code", 0);
    w.expect_nstr("acl.error_message", None);
    w.expect_i8("acl.resource_type", 2);
    w.expect_str("acl.resource_name", "orders");
    w.expect_i8("acl.pattern_type", 4);
    w.expect_str("acl.principal", ACL_PRINCIPAL);
    w.expect_str("acl.host", "*");
    w.expect_i8("acl.operation", 3);
    w.expect_i8("acl.permission_type", 3);
    if flex {
        w.expect_no_tags("acl tags");
        w.expect_no_tags("filter tags");
        w.expect_no_tags("top-level tags");
    }
    w.end();
}

// DescribeProducersResponse.json: validVersions 0, flexible 0+. ThrottleTimeMs,
// Topics[]{Name, Partitions[]{PartitionIndex, ErrorCode, ErrorMessage (nullable string),
// ActiveProducers[]{ProducerId (int64), ProducerEpoch (int32), LastSequence (int32),
// LastTimestamp (int64), CoordinatorEpoch (int32), CurrentTxnStartOffset (int64)}}}.
fn walk_describe_producers(frame: &[u8], v: i16) {
    let mut w = Walk::response(frame, format!("DescribeProducers v{v}"), true, true);
    w.expect_i32("throttle_time_ms", THROTTLE);
    w.expect_array("topics", 3);
    w.expect_str("topic.name", TOPIC);
    w.expect_array("topic.partitions", 2);
    w.expect_i32("partition.partition_index", 0);
    w.expect_i16("partition.error_code", 0);
    w.expect_nstr("partition.error_message", None);
    w.expect_array("partition.active_producers", ACTIVE_PRODUCERS.len());
    for &(pid, epoch, seq, ts, coordinator_epoch, txn_start) in ACTIVE_PRODUCERS {
        w.expect_i64("producer.producer_id", pid);
        w.expect_i32("producer.producer_epoch", epoch);
        w.expect_i32("producer.last_sequence", seq);
        w.expect_i64("producer.last_timestamp", ts);
        w.expect_i32("producer.coordinator_epoch", coordinator_epoch);
        w.expect_i64("producer.current_txn_start_offset", txn_start);
        w.expect_no_tags("producer tags");
    }
    w.expect_no_tags("partition tags");
    let failed = |w: &mut Walk, index: i32, error: ResponseError, message: Option<&str>| {
        w.expect_i32("partition.partition_index", index);
        w.expect_i16("partition.error_code", error.code());
        w.expect_nstr("partition.error_message", message);
        w.expect_array("partition.active_producers", 0);
        w.expect_no_tags("partition tags");
    };
    failed(&mut w, 9, ResponseError::UnknownTopicOrPartition, None);
    w.expect_no_tags("topic tags");
    w.expect_str("topic.name", "ghost");
    w.expect_array("topic.partitions", 1);
    failed(
        &mut w,
        0,
        ResponseError::UnknownTopicOrPartition,
        Some(UNKNOWN_TOPIC_MSG),
    );
    w.expect_no_tags("topic tags");
    w.expect_str("topic.name", "bad topic");
    w.expect_array("topic.partitions", 1);
    failed(
        &mut w,
        0,
        ResponseError::InvalidTopicException,
        Some(INVALID_TOPIC_NAME_MSG),
    );
    w.expect_no_tags("topic tags");
    w.expect_no_tags("top-level tags");
    w.end();
}

// ---------------------------------------------------------------------------------------------
// The metadata log's quorum: DescribeQuorum (55), RemoveRaftVoter (81) and AddRaftVoter (80)
// (KIP-595, KIP-853).

const METADATA_TOPIC: &str = "__cluster_metadata";
/// The metadata log's leader epoch (Raft term) and high watermark (commit index).
const QUORUM_EPOCH: i32 = 4;
const QUORUM_HW: i64 = 1187;
/// When the leader answered (ms since the epoch).
const QUORUM_NOW: i64 = 1_700_000_123_456;
/// The quorum's replicas: (id, directory id, log end offset, last fetch, last caught up).
/// Voters 1 (the leader: both timestamps are now), 2 (caught up) and 3 (a little behind), and
/// node 4, a learner catching up (an observer) that has not been caught up yet.
type QuorumReplica = (i32, [u8; 16], i64, i64, i64);
const QUORUM_VOTERS: &[QuorumReplica] = &[
    (
        1,
        [
            0x5c, 0x1f, 0x0b, 0x2d, 0x9e, 0x47, 0x4a, 0x61, 0x8f, 0x12, 0x3a, 0x54, 0x6b, 0x7c,
            0x8d, 0x9e,
        ],
        QUORUM_HW,
        QUORUM_NOW,
        QUORUM_NOW,
    ),
    (
        2,
        [
            0xa3, 0x04, 0x6e, 0x11, 0x27, 0xd8, 0x4b, 0x90, 0xb6, 0x45, 0x0c, 0x7e, 0x21, 0x93,
            0xf0, 0x58,
        ],
        QUORUM_HW,
        QUORUM_NOW - 12,
        QUORUM_NOW - 12,
    ),
    (
        3,
        [
            0x0e, 0x9d, 0x33, 0xc7, 0x64, 0x2a, 0x41, 0x05, 0x9c, 0x7b, 0xe2, 0x18, 0x4f, 0xa6,
            0x3d, 0x71,
        ],
        QUORUM_HW - 7,
        QUORUM_NOW - 340,
        QUORUM_NOW - 1_502,
    ),
];
const QUORUM_OBSERVERS: &[QuorumReplica] = &[(
    4,
    [
        0x66, 0xe0, 0x4d, 0x8a, 0x13, 0xbc, 0x4e, 0x27, 0xa9, 0x50, 0xd4, 0x0f, 0x82, 0x3b, 0xc5,
        0x19,
    ],
    950,
    QUORUM_NOW - 25,
    -1,
)];
/// The voters' node-to-node endpoints (`Nodes`, v2): (node id, listener, host, port).
const QUORUM_NODES: &[(i32, &str, &str, u16)] = &[
    (1, "CONTROLLER", HOST, 9093),
    (2, "CONTROLLER", HOST, 9193),
    (3, "CONTROLLER", HOST, 9293),
];

/// DescribeQuorum as `kafka-metadata-quorum describe --status` sees it, in every served version:
/// the metadata log's partition with its leader, three voters and one observer; v1 adds the
/// replicas' fetch timestamps; v2 the directory ids, the voters' endpoints and the error
/// messages, which stay the empty string of the crate's default: what Kafka's leader sends
/// (`RaftUtil.singletonDescribeQuorumResponse` sets none, and the generated default of a string is "").
fn describe_quorum_response(v: i16) -> DescribeQuorumResponse {
    use describe_quorum_response::*;
    let replicas = |list: &[QuorumReplica]| -> Vec<ReplicaState> {
        list.iter()
            .map(|&(id, dir, leo, fetch, caught_up)| {
                let mut r = ReplicaState::default()
                    .with_replica_id(BrokerId(id))
                    .with_log_end_offset(leo);
                if v >= 1 {
                    r.last_fetch_timestamp = fetch;
                    r.last_caught_up_timestamp = caught_up;
                }
                if v >= 2 {
                    r.replica_directory_id = uuid(dir);
                }
                r
            })
            .collect()
    };
    let partition = PartitionData::default()
        .with_partition_index(0)
        .with_error_code(0)
        .with_leader_id(BrokerId(1))
        .with_leader_epoch(QUORUM_EPOCH)
        .with_high_watermark(QUORUM_HW)
        .with_current_voters(replicas(QUORUM_VOTERS))
        .with_observers(replicas(QUORUM_OBSERVERS));
    let mut r = DescribeQuorumResponse::default()
        .with_error_code(0)
        .with_topics(vec![TopicData::default()
            .with_topic_name(TopicName(s(METADATA_TOPIC)))
            .with_partitions(vec![partition])]);
    if v >= 2 {
        r.nodes = QUORUM_NODES
            .iter()
            .map(|&(id, listener, host, port)| {
                Node::default()
                    .with_node_id(BrokerId(id))
                    .with_listeners(vec![Listener::default()
                        .with_name(s(listener))
                        .with_host(s(host))
                        .with_port(port)])
            })
            .collect();
    }
    r
}

/// RemoveRaftVoter (v0 only): node 3 removed. Kafka's success carries the message "NONE"
/// (`RaftUtil.removeVoterResponse` falls back to `Errors.NONE.message()`).
fn remove_raft_voter_response(_v: i16) -> RemoveRaftVoterResponse {
    RemoveRaftVoterResponse::default()
        .with_throttle_time_ms(THROTTLE)
        .with_error_code(0)
        .with_error_message(Some(s("NONE")))
}

const VOTER_NOT_FOUND_MSG: &str = "node 7 is not a voter of this cluster (voters [1, 2, 3])";

/// RemoveRaftVoter of a node that is not a voter: VOTER_NOT_FOUND with its message.
fn remove_raft_voter_error_response(_v: i16) -> RemoveRaftVoterResponse {
    RemoveRaftVoterResponse::default()
        .with_throttle_time_ms(THROTTLE)
        .with_error_code(ResponseError::VoterNotFound.code())
        .with_error_message(Some(s(VOTER_NOT_FOUND_MSG)))
}

// DescribeQuorumResponse.json: validVersions 0-2, flexible 0+ (so response header v1). ErrorCode,
// ErrorMessage (nullable)[2+], Topics[]{TopicName, Partitions[]{PartitionIndex, ErrorCode,
// ErrorMessage (nullable)[2+], LeaderId, LeaderEpoch, HighWatermark (int64),
// CurrentVoters[]ReplicaState, Observers[]ReplicaState}}, Nodes[2+][]{NodeId,
// Listeners[]{Name, Host, Port (uint16)}}; ReplicaState (common struct): ReplicaId,
// ReplicaDirectoryId (uuid)[2+], LogEndOffset (int64), LastFetchTimestamp (int64)[1+],
// LastCaughtUpTimestamp (int64)[1+]. No tagged fields are defined.
fn walk_describe_quorum(frame: &[u8], v: i16) {
    let mut w = Walk::response(frame, format!("DescribeQuorum v{v}"), true, true);
    w.expect_i16("error_code", 0);
    if v >= 2 {
        w.expect_nstr("error_message", Some(""));
    }
    w.expect_array("topics", 1);
    w.expect_str("topics[0].topic_name", METADATA_TOPIC);
    w.expect_array("topics[0].partitions", 1);
    w.expect_i32("partition.partition_index", 0);
    w.expect_i16("partition.error_code", 0);
    if v >= 2 {
        w.expect_nstr("partition.error_message", Some(""));
    }
    w.expect_i32("partition.leader_id", 1);
    w.expect_i32("partition.leader_epoch", QUORUM_EPOCH);
    w.expect_i64("partition.high_watermark", QUORUM_HW);
    for (what, list) in [
        ("partition.current_voters", QUORUM_VOTERS),
        ("partition.observers", QUORUM_OBSERVERS),
    ] {
        w.expect_array(what, list.len());
        for &(id, dir, leo, fetch, caught_up) in list {
            w.expect_i32("replica.replica_id", id);
            if v >= 2 {
                w.expect_uuid("replica.replica_directory_id", dir);
            }
            w.expect_i64("replica.log_end_offset", leo);
            if v >= 1 {
                w.expect_i64("replica.last_fetch_timestamp", fetch);
                w.expect_i64("replica.last_caught_up_timestamp", caught_up);
            }
            w.expect_no_tags("replica tags");
        }
    }
    w.expect_no_tags("partition tags");
    w.expect_no_tags("topic tags");
    if v >= 2 {
        w.expect_array("nodes", QUORUM_NODES.len());
        for &(id, listener, host, port) in QUORUM_NODES {
            w.expect_i32("node.node_id", id);
            w.expect_array("node.listeners", 1);
            w.expect_str("listener.name", listener);
            w.expect_str("listener.host", host);
            w.expect_u16("listener.port", port);
            w.expect_no_tags("listener tags");
            w.expect_no_tags("node tags");
        }
    }
    w.expect_no_tags("top-level tags");
    w.end();
}

// RemoveRaftVoterResponse.json: validVersions 0, flexible 0+. ThrottleTimeMs, ErrorCode,
// ErrorMessage (nullable). No tagged fields are defined.
fn walk_remove_raft_voter_body(frame: &[u8], v: i16, error: i16, message: Option<&str>) {
    let mut w = Walk::response(frame, format!("RemoveRaftVoter v{v}"), true, true);
    w.expect_i32("throttle_time_ms", THROTTLE);
    w.expect_i16("error_code", error);
    w.expect_nstr("error_message", message);
    w.expect_no_tags("top-level tags");
    w.end();
}

fn walk_remove_raft_voter(frame: &[u8], v: i16) {
    walk_remove_raft_voter_body(frame, v, 0, Some("NONE"));
}

fn walk_remove_raft_voter_error(frame: &[u8], v: i16) {
    walk_remove_raft_voter_body(
        frame,
        v,
        ResponseError::VoterNotFound.code(),
        Some(VOTER_NOT_FOUND_MSG),
    );
}

/// AddRaftVoter (v0 only): node 4, the observer of `QUORUM_OBSERVERS`, added. Kafka's success
/// carries the message "NONE" too (`RaftUtil.addVoterResponse` falls back to
/// `Errors.NONE.message()`).
fn add_raft_voter_response(_v: i16) -> AddRaftVoterResponse {
    AddRaftVoterResponse::default()
        .with_throttle_time_ms(THROTTLE)
        .with_error_code(0)
        .with_error_message(Some(s("NONE")))
}

const DUPLICATE_VOTER_MSG: &str = "node 3 is already a voter of this cluster (voters [1, 2, 3])";

/// AddRaftVoter of a node that already is a voter: DUPLICATE_VOTER (126) with its message.
fn add_raft_voter_error_response(_v: i16) -> AddRaftVoterResponse {
    AddRaftVoterResponse::default()
        .with_throttle_time_ms(THROTTLE)
        .with_error_code(ResponseError::DuplicateVoter.code())
        .with_error_message(Some(s(DUPLICATE_VOTER_MSG)))
}

// AddRaftVoterResponse.json: validVersions 0 (later versions are the same), flexible 0+.
// ThrottleTimeMs, ErrorCode, ErrorMessage (nullable). No tagged fields are defined.
fn walk_add_raft_voter_body(frame: &[u8], v: i16, error: i16, message: Option<&str>) {
    let mut w = Walk::response(frame, format!("AddRaftVoter v{v}"), true, true);
    w.expect_i32("throttle_time_ms", THROTTLE);
    w.expect_i16("error_code", error);
    w.expect_nstr("error_message", message);
    w.expect_no_tags("top-level tags");
    w.end();
}

fn walk_add_raft_voter(frame: &[u8], v: i16) {
    walk_add_raft_voter_body(frame, v, 0, Some("NONE"));
}

fn walk_add_raft_voter_error(frame: &[u8], v: i16) {
    // DUPLICATE_VOTER is 126 in Kafka's `Errors`, independently of the crate's table.
    walk_add_raft_voter_body(frame, v, 126, Some(DUPLICATE_VOTER_MSG));
}

// ---------------------------------------------------------------------------------------------
// Leader elections: ElectLeaders (43, KIP-183 / KIP-460).

const ELECTION_NOT_NEEDED_MSG: &str = "Leader election not needed for topic partition.";
const PREFERRED_LEADER_NA_MSG: &str = "The preferred leader was not available.";
const NO_SUCH_TOPIC_GHOST_MSG: &str = "No such topic as ghost";

/// ElectLeaders as `kafka-leader-election --election-type preferred` sees it, in every served
/// version: on "orders" partition 0 elected (NONE, null message), partition 1 already led by its
/// preferred replica (ELECTION_NOT_NEEDED) and partition 2's preferred replica down
/// (PREFERRED_LEADER_NOT_AVAILABLE); "ghost" does not exist. The top-level error code is v1+.
fn elect_leaders_response(_v: i16) -> ElectLeadersResponse {
    use elect_leaders_response::*;
    let part = |p: i32, e: ResponseError, msg: Option<&str>| {
        PartitionResult::default()
            .with_partition_id(p)
            .with_error_code(e.code())
            .with_error_message(msg.map(s))
    };
    ElectLeadersResponse::default()
        .with_throttle_time_ms(THROTTLE)
        .with_error_code(0)
        .with_replica_election_results(vec![
            ReplicaElectionResult::default()
                .with_topic(TopicName(s(TOPIC)))
                .with_partition_result(vec![
                    PartitionResult::default()
                        .with_partition_id(0)
                        .with_error_code(0)
                        .with_error_message(None),
                    part(
                        1,
                        ResponseError::ElectionNotNeeded,
                        Some(ELECTION_NOT_NEEDED_MSG),
                    ),
                    part(
                        2,
                        ResponseError::PreferredLeaderNotAvailable,
                        Some(PREFERRED_LEADER_NA_MSG),
                    ),
                ]),
            ReplicaElectionResult::default()
                .with_topic(TopicName(s("ghost")))
                .with_partition_result(vec![part(
                    0,
                    ResponseError::UnknownTopicOrPartition,
                    Some(NO_SUCH_TOPIC_GHOST_MSG),
                )]),
        ])
}

/// ElectLeaders from a caller without ALTER on the cluster: Kafka answers
/// CLUSTER_AUTHORIZATION_FAILED at the top level (v1+) and for every requested partition (here
/// "orders" 0 and 1), with `new ApiError(CLUSTER_AUTHORIZATION_FAILED, null)`'s null message.
fn elect_leaders_error_response(v: i16) -> ElectLeadersResponse {
    use elect_leaders_response::*;
    let denied = ResponseError::ClusterAuthorizationFailed.code();
    let mut r = ElectLeadersResponse::default()
        .with_throttle_time_ms(THROTTLE)
        .with_replica_election_results(vec![ReplicaElectionResult::default()
            .with_topic(TopicName(s(TOPIC)))
            .with_partition_result(
                (0..2)
                    .map(|p| {
                        PartitionResult::default()
                            .with_partition_id(p)
                            .with_error_code(denied)
                            .with_error_message(None)
                    })
                    .collect(),
            )]);
    if v >= 1 {
        r.error_code = denied;
    }
    r
}

// ElectLeadersResponse.json: validVersions 0-2, flexible 2+ (response header v1 from v2).
// ThrottleTimeMs, ErrorCode[1+], ReplicaElectionResults[]{Topic, PartitionResult[]{PartitionId,
// ErrorCode, ErrorMessage (nullable 0+)}}. No tagged fields are defined.
type ElectionResult<'a> = (&'a str, &'a [(i32, i16, Option<&'a str>)]);

fn walk_elect_leaders_body(frame: &[u8], v: i16, ctx: &str, error: i16, want: &[ElectionResult]) {
    let flex = v >= 2;
    let mut w = Walk::response(frame, format!("ElectLeaders v{v}{ctx}"), flex, flex);
    w.expect_i32("throttle_time_ms", THROTTLE);
    if v >= 1 {
        w.expect_i16("error_code", error);
    }
    w.expect_array("replica_election_results", want.len());
    for &(topic, parts) in want {
        w.expect_str("result.topic", topic);
        w.expect_array("result.partition_result", parts.len());
        for &(p, e, msg) in parts {
            w.expect_i32("partition_result.partition_id", p);
            w.expect_i16("partition_result.error_code", e);
            w.expect_nstr("partition_result.error_message", msg);
            w.expect_no_tags("partition_result tags");
        }
        w.expect_no_tags("result tags");
    }
    w.expect_no_tags("top-level tags");
    w.end();
}

fn walk_elect_leaders(frame: &[u8], v: i16) {
    // ELECTION_NOT_NEEDED 84, PREFERRED_LEADER_NOT_AVAILABLE 80, UNKNOWN_TOPIC_OR_PARTITION 3 in
    // Kafka's `Errors`, independently of the crate's table.
    walk_elect_leaders_body(
        frame,
        v,
        "",
        0,
        &[
            (
                TOPIC,
                &[
                    (0, 0, None),
                    (1, 84, Some(ELECTION_NOT_NEEDED_MSG)),
                    (2, 80, Some(PREFERRED_LEADER_NA_MSG)),
                ],
            ),
            ("ghost", &[(0, 3, Some(NO_SUCH_TOPIC_GHOST_MSG))]),
        ],
    );
}

fn walk_elect_leaders_error(frame: &[u8], v: i16) {
    // CLUSTER_AUTHORIZATION_FAILED is 31 in Kafka's `Errors`.
    walk_elect_leaders_body(
        frame,
        v,
        " (CLUSTER_AUTHORIZATION_FAILED)",
        31,
        &[(TOPIC, &[(0, 31, None), (1, 31, None)])],
    );
}

// ---------------------------------------------------------------------------------------------
// Log directories: DescribeLogDirs (35, KIP-113; v3 KIP-700, v4 KIP-827).

const LOG_DIR: &str = "/var/lib/ringleader/data";
const OFFLINE_LOG_DIR: &str = "/mnt/disk2/ringleader";
/// The volume of `LOG_DIR` (v4+): sizes past 2^32 so both halves of the int64 count.
const VOLUME_TOTAL: i64 = 107_374_182_400;
const VOLUME_USABLE: i64 = 53_687_091_200;
/// (topic, [(partition, size, offset lag, future)]) in `LOG_DIR`.
type LogDirTopic<'a> = (&'a str, &'a [(i32, i64, i64, bool)]);
const LOG_DIR_TOPICS: &[LogDirTopic] = &[
    (
        TOPIC,
        &[(0, 5_368_709_121, 0, false), (1, 1_048_576, 0, false)],
    ),
    (AUDIT_TOPIC, &[(0, 0, 0, false)]),
];

/// DescribeLogDirs as `kafka-log-dirs --describe` (the Admin's `describeLogDirs`) sees it, in
/// every served version: the shape Kafka gives for a broker with two `log.dirs`, one holding
/// "orders" 0 and 1 and an empty "audit-log" 0, the other offline (KAFKA_STORAGE_ERROR, no topics,
/// and the schema's -1 volume sizes, as `ReplicaManager.describeLogDirs` leaves them). The
/// top-level error code is v3+, the volume sizes v4+ (below v4 they stay at the -1 the decoder
/// gives an absent field, so the round trip compares equal).
fn describe_log_dirs_response(v: i16) -> DescribeLogDirsResponse {
    use describe_log_dirs_response::*;
    let mut online = DescribeLogDirsResult::default()
        .with_error_code(0)
        .with_log_dir(s(LOG_DIR))
        .with_topics(
            LOG_DIR_TOPICS
                .iter()
                .map(|&(name, parts)| {
                    DescribeLogDirsTopic::default()
                        .with_name(TopicName(s(name)))
                        .with_partitions(
                            parts
                                .iter()
                                .map(|&(p, size, lag, future)| {
                                    DescribeLogDirsPartition::default()
                                        .with_partition_index(p)
                                        .with_partition_size(size)
                                        .with_offset_lag(lag)
                                        .with_is_future_key(future)
                                })
                                .collect(),
                        )
                })
                .collect(),
        );
    if v >= 4 {
        online = online
            .with_total_bytes(VOLUME_TOTAL)
            .with_usable_bytes(VOLUME_USABLE);
    }
    let offline = DescribeLogDirsResult::default()
        .with_error_code(ResponseError::KafkaStorageError.code())
        .with_log_dir(s(OFFLINE_LOG_DIR));
    DescribeLogDirsResponse::default()
        .with_throttle_time_ms(THROTTLE)
        .with_error_code(0)
        .with_results(vec![online, offline])
}

/// DescribeLogDirs from a caller without DESCRIBE on the cluster: Kafka answers no results and,
/// from v3, CLUSTER_AUTHORIZATION_FAILED at the top level (below v3 the empty list is all the
/// Admin gets, and it reads that as CLUSTER_AUTHORIZATION_FAILED itself).
fn describe_log_dirs_error_response(v: i16) -> DescribeLogDirsResponse {
    let mut r = DescribeLogDirsResponse::default()
        .with_throttle_time_ms(THROTTLE)
        .with_results(vec![]);
    if v >= 3 {
        r.error_code = ResponseError::ClusterAuthorizationFailed.code();
    }
    r
}

// DescribeLogDirsResponse.json: validVersions 1-4 (0 removed in 4.0), flexible 2+ (response
// header v1 from v2). ThrottleTimeMs, ErrorCode[3+], Results[]{ErrorCode, LogDir,
// Topics[]{Name, Partitions[]{PartitionIndex, PartitionSize int64, OffsetLag int64,
// IsFutureKey bool}}, TotalBytes int64 [4+], UsableBytes int64 [4+]}. No tagged fields are
// defined.
/// (error, log dir, topics, total bytes, usable bytes) of one result.
type LogDirResult<'a> = (i16, &'a str, &'a [LogDirTopic<'a>], i64, i64);

fn walk_describe_log_dirs_body(frame: &[u8], v: i16, ctx: &str, error: i16, want: &[LogDirResult]) {
    let flex = v >= 2;
    let mut w = Walk::response(frame, format!("DescribeLogDirs v{v}{ctx}"), flex, flex);
    w.expect_i32("throttle_time_ms", THROTTLE);
    if v >= 3 {
        w.expect_i16("error_code", error);
    }
    w.expect_array("results", want.len());
    for &(e, dir, topics, total, usable) in want {
        w.expect_i16("result.error_code", e);
        w.expect_str("result.log_dir", dir);
        w.expect_array("result.topics", topics.len());
        for &(name, parts) in topics {
            w.expect_str("topic.name", name);
            w.expect_array("topic.partitions", parts.len());
            for &(p, size, lag, future) in parts {
                w.expect_i32("partition.partition_index", p);
                w.expect_i64("partition.partition_size", size);
                w.expect_i64("partition.offset_lag", lag);
                w.expect_bool("partition.is_future_key", future);
                w.expect_no_tags("partition tags");
            }
            w.expect_no_tags("topic tags");
        }
        if v >= 4 {
            w.expect_i64("result.total_bytes", total);
            w.expect_i64("result.usable_bytes", usable);
        }
        w.expect_no_tags("result tags");
    }
    w.expect_no_tags("top-level tags");
    w.end();
}

fn walk_describe_log_dirs(frame: &[u8], v: i16) {
    // KAFKA_STORAGE_ERROR is 56 in Kafka's `Errors`; -1 is the schema's TotalBytes/UsableBytes
    // default.
    walk_describe_log_dirs_body(
        frame,
        v,
        "",
        0,
        &[
            (0, LOG_DIR, LOG_DIR_TOPICS, VOLUME_TOTAL, VOLUME_USABLE),
            (56, OFFLINE_LOG_DIR, &[], -1, -1),
        ],
    );
}

fn walk_describe_log_dirs_error(frame: &[u8], v: i16) {
    // CLUSTER_AUTHORIZATION_FAILED is 31 in Kafka's `Errors`.
    walk_describe_log_dirs_body(frame, v, " (CLUSTER_AUTHORIZATION_FAILED)", 31, &[]);
}

// ---------------------------------------------------------------------------------------------
// Partition reassignments (KIP-455): AlterPartitionReassignments (45; v1, 4.1, is KIP-860) and
// ListPartitionReassignments (46).

const UNREGISTERED_BROKER_MSG: &str =
    "The manual partition assignment includes broker 7, but no such broker is registered.";
const NO_TOPIC_NAMED_GHOST_MSG: &str = "Unable to find a topic named ghost.";
const CLUSTER_AUTHZ_MSG: &str = "Cluster authorization failed.";

/// (topic, [(partition, error code, error message)]) of an AlterPartitionReassignments answer.
type ReassignResult<'a> = (&'a str, &'a [(i32, i16, Option<&'a str>)]);

fn reassign_results(
    want: &[ReassignResult],
) -> Vec<alter_partition_reassignments_response::ReassignableTopicResponse> {
    use alter_partition_reassignments_response::*;
    want.iter()
        .map(|&(name, parts)| {
            ReassignableTopicResponse::default()
                .with_name(TopicName(s(name)))
                .with_partitions(
                    parts
                        .iter()
                        .map(|&(p, e, msg)| {
                            ReassignablePartitionResponse::default()
                                .with_partition_index(p)
                                .with_error_code(e)
                                .with_error_message(msg.map(s))
                        })
                        .collect(),
                )
        })
        .collect()
}

/// AlterPartitionReassignments as `kafka-reassign-partitions --execute` / `--cancel` (the Admin's
/// `alterPartitionReassignments`) sees it, in every served version: "orders" 0 moved (NONE, null
/// message); "orders" 1 sent to a broker that is not registered (INVALID_REPLICA_ASSIGNMENT with
/// the controller's message); a cancellation (null replicas) of "audit-log" 0, which has no
/// reassignment under way (NO_REASSIGNMENT_IN_PROGRESS with a null message: Kafka's exception
/// carries the error's default text, which `ApiError.fromThrowable` drops); and "ghost", which
/// does not exist (UNKNOWN_TOPIC_OR_PARTITION). Top level NONE with a null message
/// (`ReplicationControlManager.alterPartitionReassignments`). AllowReplicationFactorChange is
/// v1+; it stays at the schema's default true (which the decoder also gives below v1, so the
/// round trip compares equal).
fn alter_partition_reassignments_response(_v: i16) -> AlterPartitionReassignmentsResponse {
    let invalid = ResponseError::InvalidReplicaAssignment.code();
    let none_in_progress = ResponseError::NoReassignmentInProgress.code();
    let unknown = ResponseError::UnknownTopicOrPartition.code();
    AlterPartitionReassignmentsResponse::default()
        .with_throttle_time_ms(THROTTLE)
        .with_allow_replication_factor_change(true)
        .with_error_code(0)
        .with_error_message(None)
        .with_responses(reassign_results(&[
            (
                TOPIC,
                &[(0, 0, None), (1, invalid, Some(UNREGISTERED_BROKER_MSG))],
            ),
            (AUDIT_TOPIC, &[(0, none_in_progress, None)]),
            ("ghost", &[(0, unknown, Some(NO_TOPIC_NAMED_GHOST_MSG))]),
        ]))
}

/// AlterPartitionReassignments from a caller without ALTER on the cluster: the shape of
/// `AlterPartitionReassignmentsRequest.getErrorResponse`, CLUSTER_AUTHORIZATION_FAILED with its
/// message at the top level and again for every requested partition (here "orders" 0 and 1 and
/// "audit-log" 0); AllowReplicationFactorChange (v1+) left at its default.
fn alter_partition_reassignments_error_response(_v: i16) -> AlterPartitionReassignmentsResponse {
    let denied = ResponseError::ClusterAuthorizationFailed.code();
    let msg = Some(CLUSTER_AUTHZ_MSG);
    AlterPartitionReassignmentsResponse::default()
        .with_throttle_time_ms(THROTTLE)
        .with_error_code(denied)
        .with_error_message(msg.map(s))
        .with_responses(reassign_results(&[
            (TOPIC, &[(0, denied, msg), (1, denied, msg)]),
            (AUDIT_TOPIC, &[(0, denied, msg)]),
        ]))
}

// AlterPartitionReassignmentsResponse.json: validVersions 0-1 (v1, KIP-860, adds
// AllowReplicationFactorChange), flexible 0+ (response header v1). ThrottleTimeMs,
// AllowReplicationFactorChange bool [1+] (default true, ignorable), ErrorCode, ErrorMessage
// (nullable 0+), Responses[]{Name, Partitions[]{PartitionIndex, ErrorCode, ErrorMessage (nullable
// 0+)}}. No tagged fields are defined.
fn walk_alter_partition_reassignments_body(
    frame: &[u8],
    v: i16,
    ctx: &str,
    top: (i16, Option<&str>),
    want: &[ReassignResult],
) {
    let mut w = Walk::response(
        frame,
        format!("AlterPartitionReassignments v{v}{ctx}"),
        true,
        true,
    );
    w.expect_i32("throttle_time_ms", THROTTLE);
    if v >= 1 {
        w.expect_bool("allow_replication_factor_change", true);
    }
    w.expect_i16("error_code", top.0);
    w.expect_nstr("error_message", top.1);
    w.expect_array("responses", want.len());
    for &(name, parts) in want {
        w.expect_str("response.name", name);
        w.expect_array("response.partitions", parts.len());
        for &(p, e, msg) in parts {
            w.expect_i32("partition.partition_index", p);
            w.expect_i16("partition.error_code", e);
            w.expect_nstr("partition.error_message", msg);
            w.expect_no_tags("partition tags");
        }
        w.expect_no_tags("response tags");
    }
    w.expect_no_tags("top-level tags");
    w.end();
}

fn walk_alter_partition_reassignments(frame: &[u8], v: i16) {
    // INVALID_REPLICA_ASSIGNMENT 39, NO_REASSIGNMENT_IN_PROGRESS 85, UNKNOWN_TOPIC_OR_PARTITION 3
    // in Kafka's `Errors`, independently of the crate's table.
    walk_alter_partition_reassignments_body(
        frame,
        v,
        "",
        (0, None),
        &[
            (
                TOPIC,
                &[(0, 0, None), (1, 39, Some(UNREGISTERED_BROKER_MSG))],
            ),
            (AUDIT_TOPIC, &[(0, 85, None)]),
            ("ghost", &[(0, 3, Some(NO_TOPIC_NAMED_GHOST_MSG))]),
        ],
    );
}

fn walk_alter_partition_reassignments_error(frame: &[u8], v: i16) {
    // CLUSTER_AUTHORIZATION_FAILED is 31 in Kafka's `Errors`.
    let msg = Some(CLUSTER_AUTHZ_MSG);
    walk_alter_partition_reassignments_body(
        frame,
        v,
        " (CLUSTER_AUTHORIZATION_FAILED)",
        (31, msg),
        &[
            (TOPIC, &[(0, 31, msg), (1, 31, msg)]),
            (AUDIT_TOPIC, &[(0, 31, msg)]),
        ],
    );
}

/// (topic, [(partition, replicas, adding replicas, removing replicas)]) of a
/// ListPartitionReassignments answer.
type OngoingReassignment<'a> = (&'a str, &'a [(i32, &'a [i32], &'a [i32], &'a [i32])]);

/// Three reassignments under way, as Kafka lists them (the target replicas, then those being
/// removed): "orders" 0 growing from [1, 2] to [1, 2, 3], "orders" 2 moving from [1, 2] to
/// [2, 3], and "audit-log" 0 shrinking from [1, 2, 3] to [3, 1].
const ONGOING_REASSIGNMENTS: &[OngoingReassignment] = &[
    (
        TOPIC,
        &[(0, &[1, 2, 3], &[3], &[]), (2, &[2, 3, 1], &[3], &[1])],
    ),
    (AUDIT_TOPIC, &[(0, &[3, 1, 2], &[], &[2])]),
];

/// "orders" 0 and 2 as a refused request naming them gets them back: the partition indexes asked
/// for, with empty replica lists.
const REFUSED_REASSIGNMENTS: &[OngoingReassignment] =
    &[(TOPIC, &[(0, &[], &[], &[]), (2, &[], &[], &[])])];

fn ongoing_reassignments(
    want: &[OngoingReassignment],
) -> Vec<list_partition_reassignments_response::OngoingTopicReassignment> {
    use list_partition_reassignments_response::*;
    let ids = |b: &[i32]| b.iter().map(|&n| BrokerId(n)).collect::<Vec<_>>();
    want.iter()
        .map(|&(name, parts)| {
            OngoingTopicReassignment::default()
                .with_name(TopicName(s(name)))
                .with_partitions(
                    parts
                        .iter()
                        .map(|&(p, replicas, adding, removing)| {
                            OngoingPartitionReassignment::default()
                                .with_partition_index(p)
                                .with_replicas(ids(replicas))
                                .with_adding_replicas(ids(adding))
                                .with_removing_replicas(ids(removing))
                        })
                        .collect(),
                )
        })
        .collect()
}

/// ListPartitionReassignments as `kafka-reassign-partitions --list` (the Admin's
/// `listPartitionReassignments`) sees it: NONE with a null message and the reassignments under
/// way (`ReplicationControlManager.listPartitionReassignments`).
fn list_partition_reassignments_response(_v: i16) -> ListPartitionReassignmentsResponse {
    ListPartitionReassignmentsResponse::default()
        .with_throttle_time_ms(THROTTLE)
        .with_error_code(0)
        .with_error_message(None)
        .with_topics(ongoing_reassignments(ONGOING_REASSIGNMENTS))
}

/// ListPartitionReassignments from a caller without DESCRIBE on the cluster, for "orders" 0 and 2
/// (the Admin's `listPartitionReassignments(partitions)`): the shape of
/// `ListPartitionReassignmentsRequest.getErrorResponse`, CLUSTER_AUTHORIZATION_FAILED with its
/// message and each requested partition echoed with empty replica lists (a null topic list, as
/// `--list` sends, gets no topics).
fn list_partition_reassignments_error_response(_v: i16) -> ListPartitionReassignmentsResponse {
    ListPartitionReassignmentsResponse::default()
        .with_throttle_time_ms(THROTTLE)
        .with_error_code(ResponseError::ClusterAuthorizationFailed.code())
        .with_error_message(Some(s(CLUSTER_AUTHZ_MSG)))
        .with_topics(ongoing_reassignments(REFUSED_REASSIGNMENTS))
}

// ListPartitionReassignmentsResponse.json: validVersions 0, flexible 0+ (response header v1).
// ThrottleTimeMs, ErrorCode, ErrorMessage (nullable 0+), Topics[]{Name, Partitions[]{
// PartitionIndex, Replicas []int32, AddingReplicas []int32, RemovingReplicas []int32}}. No tagged
// fields are defined.
fn walk_list_partition_reassignments_body(
    frame: &[u8],
    v: i16,
    ctx: &str,
    top: (i16, Option<&str>),
    want: &[OngoingReassignment],
) {
    let mut w = Walk::response(
        frame,
        format!("ListPartitionReassignments v{v}{ctx}"),
        true,
        true,
    );
    w.expect_i32("throttle_time_ms", THROTTLE);
    w.expect_i16("error_code", top.0);
    w.expect_nstr("error_message", top.1);
    w.expect_array("topics", want.len());
    for &(name, parts) in want {
        w.expect_str("topic.name", name);
        w.expect_array("topic.partitions", parts.len());
        for &(p, replicas, adding, removing) in parts {
            w.expect_i32("partition.partition_index", p);
            w.expect_i32_array("partition.replicas", replicas);
            w.expect_i32_array("partition.adding_replicas", adding);
            w.expect_i32_array("partition.removing_replicas", removing);
            w.expect_no_tags("partition tags");
        }
        w.expect_no_tags("topic tags");
    }
    w.expect_no_tags("top-level tags");
    w.end();
}

fn walk_list_partition_reassignments(frame: &[u8], v: i16) {
    walk_list_partition_reassignments_body(frame, v, "", (0, None), ONGOING_REASSIGNMENTS);
}

fn walk_list_partition_reassignments_error(frame: &[u8], v: i16) {
    // CLUSTER_AUTHORIZATION_FAILED is 31 in Kafka's `Errors`.
    walk_list_partition_reassignments_body(
        frame,
        v,
        " (CLUSTER_AUTHORIZATION_FAILED)",
        (31, Some(CLUSTER_AUTHZ_MSG)),
        REFUSED_REASSIGNMENTS,
    );
}

// ---------------------------------------------------------------------------------------------
// Golden files.

struct GoldenApi {
    api_key: i16,
    file_stem: &'static str,
    name: &'static str,
    build: fn(i16) -> Response,
    walk: fn(&[u8], i16),
}

const GOLDEN_APIS: &[GoldenApi] = &[
    GoldenApi {
        api_key: 3,
        file_stem: "metadata",
        name: "Metadata",
        build: |v| Response::Metadata(metadata_response(v)),
        walk: walk_metadata,
    },
    GoldenApi {
        api_key: 10,
        file_stem: "find_coordinator",
        name: "FindCoordinator",
        build: |v| Response::FindCoordinator(find_coordinator_response(v)),
        walk: walk_find_coordinator,
    },
    GoldenApi {
        api_key: 18,
        file_stem: "api_versions",
        name: "ApiVersions",
        build: |v| Response::ApiVersions(api_versions_response(v)),
        walk: walk_api_versions,
    },
    GoldenApi {
        api_key: 19,
        file_stem: "create_topics",
        name: "CreateTopics",
        build: |v| Response::CreateTopics(create_topics_response(v)),
        walk: walk_create_topics,
    },
    GoldenApi {
        api_key: 20,
        file_stem: "delete_topics",
        name: "DeleteTopics",
        build: |v| Response::DeleteTopics(delete_topics_response(v)),
        walk: walk_delete_topics,
    },
    GoldenApi {
        api_key: 32,
        file_stem: "describe_configs",
        name: "DescribeConfigs",
        build: |v| Response::DescribeConfigs(describe_configs_response(v)),
        walk: walk_describe_configs,
    },
    GoldenApi {
        api_key: 33,
        file_stem: "alter_configs",
        name: "AlterConfigs",
        build: |v| Response::AlterConfigs(alter_configs_response(v)),
        walk: walk_alter_configs,
    },
    GoldenApi {
        api_key: 37,
        file_stem: "create_partitions",
        name: "CreatePartitions",
        build: |v| Response::CreatePartitions(create_partitions_response(v)),
        walk: walk_create_partitions,
    },
    GoldenApi {
        api_key: 44,
        file_stem: "incremental_alter_configs",
        name: "IncrementalAlterConfigs",
        build: |v| Response::IncrementalAlterConfigs(incremental_alter_configs_response(v)),
        walk: walk_incremental_alter_configs,
    },
    GoldenApi {
        api_key: 60,
        file_stem: "describe_cluster",
        name: "DescribeCluster",
        build: |v| Response::DescribeCluster(describe_cluster_response(v)),
        walk: walk_describe_cluster,
    },
    GoldenApi {
        api_key: 1,
        file_stem: "fetch",
        name: "Fetch",
        build: |v| Response::Fetch(fetch_response(v)),
        walk: walk_fetch,
    },
    GoldenApi {
        api_key: 2,
        file_stem: "list_offsets",
        name: "ListOffsets",
        build: |v| Response::ListOffsets(list_offsets_response(v)),
        walk: walk_list_offsets,
    },
    GoldenApi {
        api_key: 8,
        file_stem: "offset_commit",
        name: "OffsetCommit",
        build: |v| Response::OffsetCommit(offset_commit_response(v)),
        walk: walk_offset_commit,
    },
    GoldenApi {
        api_key: 9,
        file_stem: "offset_fetch",
        name: "OffsetFetch",
        build: |v| Response::OffsetFetch(offset_fetch_response(v)),
        walk: walk_offset_fetch,
    },
    GoldenApi {
        api_key: 11,
        file_stem: "join_group",
        name: "JoinGroup",
        build: |v| Response::JoinGroup(join_group_response(v)),
        walk: walk_join_group,
    },
    GoldenApi {
        api_key: 12,
        file_stem: "heartbeat",
        name: "Heartbeat",
        build: |v| Response::Heartbeat(heartbeat_response(v)),
        walk: walk_heartbeat,
    },
    GoldenApi {
        api_key: 13,
        file_stem: "leave_group",
        name: "LeaveGroup",
        build: |v| Response::LeaveGroup(leave_group_response(v)),
        walk: walk_leave_group,
    },
    GoldenApi {
        api_key: 14,
        file_stem: "sync_group",
        name: "SyncGroup",
        build: |v| Response::SyncGroup(sync_group_response(v)),
        walk: walk_sync_group,
    },
    GoldenApi {
        api_key: 15,
        file_stem: "describe_groups",
        name: "DescribeGroups",
        build: |v| Response::DescribeGroups(describe_groups_response(v)),
        walk: walk_describe_groups,
    },
    GoldenApi {
        api_key: 16,
        file_stem: "list_groups",
        name: "ListGroups",
        build: |v| Response::ListGroups(list_groups_response(v)),
        walk: walk_list_groups,
    },
    GoldenApi {
        api_key: 42,
        file_stem: "delete_groups",
        name: "DeleteGroups",
        build: |v| Response::DeleteGroups(delete_groups_response(v)),
        walk: walk_delete_groups,
    },
    GoldenApi {
        api_key: 47,
        file_stem: "offset_delete",
        name: "OffsetDelete",
        build: |v| Response::OffsetDelete(offset_delete_response(v)),
        walk: walk_offset_delete,
    },
    GoldenApi {
        api_key: 68,
        file_stem: "consumer_group_heartbeat",
        name: "ConsumerGroupHeartbeat",
        build: |v| Response::ConsumerGroupHeartbeat(consumer_group_heartbeat_response(v)),
        walk: walk_consumer_group_heartbeat,
    },
    GoldenApi {
        api_key: 69,
        file_stem: "consumer_group_describe",
        name: "ConsumerGroupDescribe",
        build: |v| Response::ConsumerGroupDescribe(consumer_group_describe_response(v)),
        walk: walk_consumer_group_describe,
    },
    GoldenApi {
        api_key: 0,
        file_stem: "produce",
        name: "Produce",
        build: |v| Response::Produce(produce_response(v)),
        walk: walk_produce,
    },
    GoldenApi {
        api_key: 21,
        file_stem: "delete_records",
        name: "DeleteRecords",
        build: |v| Response::DeleteRecords(delete_records_response(v)),
        walk: walk_delete_records,
    },
    GoldenApi {
        api_key: 22,
        file_stem: "init_producer_id",
        name: "InitProducerId",
        build: |v| Response::InitProducerId(init_producer_id_response(v)),
        walk: walk_init_producer_id,
    },
    GoldenApi {
        api_key: 24,
        file_stem: "add_partitions_to_txn",
        name: "AddPartitionsToTxn",
        build: |v| Response::AddPartitionsToTxn(add_partitions_to_txn_response(v)),
        walk: walk_add_partitions_to_txn,
    },
    GoldenApi {
        api_key: 25,
        file_stem: "add_offsets_to_txn",
        name: "AddOffsetsToTxn",
        build: |v| Response::AddOffsetsToTxn(add_offsets_to_txn_response(v)),
        walk: walk_add_offsets_to_txn,
    },
    GoldenApi {
        api_key: 26,
        file_stem: "end_txn",
        name: "EndTxn",
        build: |v| Response::EndTxn(end_txn_response(v)),
        walk: walk_end_txn,
    },
    GoldenApi {
        api_key: 28,
        file_stem: "txn_offset_commit",
        name: "TxnOffsetCommit",
        build: |v| Response::TxnOffsetCommit(txn_offset_commit_response(v)),
        walk: walk_txn_offset_commit,
    },
    GoldenApi {
        api_key: 61,
        file_stem: "describe_producers",
        name: "DescribeProducers",
        build: |v| Response::DescribeProducers(describe_producers_response(v)),
        walk: walk_describe_producers,
    },
    GoldenApi {
        api_key: 65,
        file_stem: "describe_transactions",
        name: "DescribeTransactions",
        build: |v| Response::DescribeTransactions(describe_transactions_response(v)),
        walk: walk_describe_transactions,
    },
    GoldenApi {
        api_key: 66,
        file_stem: "list_transactions",
        name: "ListTransactions",
        build: |v| Response::ListTransactions(list_transactions_response(v)),
        walk: walk_list_transactions,
    },
    GoldenApi {
        api_key: 57,
        file_stem: "update_features",
        name: "UpdateFeatures",
        build: |v| Response::UpdateFeatures(update_features_response(v)),
        walk: walk_update_features,
    },
    GoldenApi {
        api_key: 50,
        file_stem: "describe_user_scram_credentials",
        name: "DescribeUserScramCredentials",
        build: |v| {
            Response::DescribeUserScramCredentials(describe_user_scram_credentials_response(v))
        },
        walk: walk_describe_user_scram_credentials,
    },
    GoldenApi {
        api_key: 51,
        file_stem: "alter_user_scram_credentials",
        name: "AlterUserScramCredentials",
        build: |v| Response::AlterUserScramCredentials(alter_user_scram_credentials_response(v)),
        walk: walk_alter_user_scram_credentials,
    },
    GoldenApi {
        api_key: 48,
        file_stem: "describe_client_quotas",
        name: "DescribeClientQuotas",
        build: |v| Response::DescribeClientQuotas(describe_client_quotas_response(v)),
        walk: walk_describe_client_quotas,
    },
    GoldenApi {
        api_key: 17,
        file_stem: "sasl_handshake",
        name: "SaslHandshake",
        build: |v| Response::SaslHandshake(sasl_handshake_response(v)),
        walk: walk_sasl_handshake,
    },
    GoldenApi {
        api_key: 36,
        file_stem: "sasl_authenticate",
        name: "SaslAuthenticate",
        build: |v| Response::SaslAuthenticate(sasl_authenticate_response(v)),
        walk: walk_sasl_authenticate,
    },
    GoldenApi {
        api_key: 29,
        file_stem: "describe_acls",
        name: "DescribeAcls",
        build: |v| Response::DescribeAcls(describe_acls_response(v)),
        walk: walk_describe_acls,
    },
    GoldenApi {
        api_key: 30,
        file_stem: "create_acls",
        name: "CreateAcls",
        build: |v| Response::CreateAcls(create_acls_response(v)),
        walk: walk_create_acls,
    },
    GoldenApi {
        api_key: 31,
        file_stem: "delete_acls",
        name: "DeleteAcls",
        build: |v| Response::DeleteAcls(delete_acls_response(v)),
        walk: walk_delete_acls,
    },
    GoldenApi {
        api_key: 55,
        file_stem: "describe_quorum",
        name: "DescribeQuorum",
        build: |v| Response::DescribeQuorum(describe_quorum_response(v)),
        walk: walk_describe_quorum,
    },
    GoldenApi {
        api_key: 81,
        file_stem: "remove_raft_voter",
        name: "RemoveRaftVoter",
        build: |v| Response::RemoveRaftVoter(remove_raft_voter_response(v)),
        walk: walk_remove_raft_voter,
    },
    GoldenApi {
        api_key: 80,
        file_stem: "add_raft_voter",
        name: "AddRaftVoter",
        build: |v| Response::AddRaftVoter(add_raft_voter_response(v)),
        walk: walk_add_raft_voter,
    },
    GoldenApi {
        api_key: 43,
        file_stem: "elect_leaders",
        name: "ElectLeaders",
        build: |v| Response::ElectLeaders(elect_leaders_response(v)),
        walk: walk_elect_leaders,
    },
    GoldenApi {
        api_key: 35,
        file_stem: "describe_log_dirs",
        name: "DescribeLogDirs",
        build: |v| Response::DescribeLogDirs(describe_log_dirs_response(v)),
        walk: walk_describe_log_dirs,
    },
    GoldenApi {
        api_key: 45,
        file_stem: "alter_partition_reassignments",
        name: "AlterPartitionReassignments",
        build: |v| Response::AlterPartitionReassignments(alter_partition_reassignments_response(v)),
        walk: walk_alter_partition_reassignments,
    },
    GoldenApi {
        api_key: 46,
        file_stem: "list_partition_reassignments",
        name: "ListPartitionReassignments",
        build: |v| Response::ListPartitionReassignments(list_partition_reassignments_response(v)),
        walk: walk_list_partition_reassignments,
    },
];

/// Further golden responses of a served API, one file per served version each
/// (`<file_stem>_vNN.hex`): the error shapes that a single builder per API cannot show.
const GOLDEN_VARIANTS: &[GoldenApi] = &[
    GoldenApi {
        api_key: 68,
        file_stem: "consumer_group_heartbeat_error",
        name: "ConsumerGroupHeartbeat (FENCED_MEMBER_EPOCH)",
        build: |v| Response::ConsumerGroupHeartbeat(consumer_group_heartbeat_error_response(v)),
        walk: walk_consumer_group_heartbeat_error,
    },
    GoldenApi {
        api_key: 22,
        file_stem: "init_producer_id_error",
        name: "InitProducerId (CONCURRENT_TRANSACTIONS)",
        build: |v| Response::InitProducerId(init_producer_id_error_response(v)),
        walk: walk_init_producer_id_error,
    },
    GoldenApi {
        api_key: 81,
        file_stem: "remove_raft_voter_error",
        name: "RemoveRaftVoter (VOTER_NOT_FOUND)",
        build: |v| Response::RemoveRaftVoter(remove_raft_voter_error_response(v)),
        walk: walk_remove_raft_voter_error,
    },
    GoldenApi {
        api_key: 80,
        file_stem: "add_raft_voter_error",
        name: "AddRaftVoter (DUPLICATE_VOTER)",
        build: |v| Response::AddRaftVoter(add_raft_voter_error_response(v)),
        walk: walk_add_raft_voter_error,
    },
    GoldenApi {
        api_key: 43,
        file_stem: "elect_leaders_error",
        name: "ElectLeaders (CLUSTER_AUTHORIZATION_FAILED)",
        build: |v| Response::ElectLeaders(elect_leaders_error_response(v)),
        walk: walk_elect_leaders_error,
    },
    GoldenApi {
        api_key: 35,
        file_stem: "describe_log_dirs_error",
        name: "DescribeLogDirs (CLUSTER_AUTHORIZATION_FAILED)",
        build: |v| Response::DescribeLogDirs(describe_log_dirs_error_response(v)),
        walk: walk_describe_log_dirs_error,
    },
    GoldenApi {
        api_key: 45,
        file_stem: "alter_partition_reassignments_error",
        name: "AlterPartitionReassignments (CLUSTER_AUTHORIZATION_FAILED)",
        build: |v| {
            Response::AlterPartitionReassignments(alter_partition_reassignments_error_response(v))
        },
        walk: walk_alter_partition_reassignments_error,
    },
    GoldenApi {
        api_key: 46,
        file_stem: "list_partition_reassignments_error",
        name: "ListPartitionReassignments (CLUSTER_AUTHORIZATION_FAILED)",
        build: |v| {
            Response::ListPartitionReassignments(list_partition_reassignments_error_response(v))
        },
        walk: walk_list_partition_reassignments_error,
    },
];

/// Golden frames that are not a (served api, version) response.
const EXTRA_GOLDEN: &[&str] = &["api_versions_unsupported_fallback"];

fn golden_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/golden")
}

fn blessing() -> bool {
    std::env::var("RINGLEADER_BLESS").is_ok_and(|v| v == "1")
}

fn hex_lines(bytes: &[u8]) -> Vec<String> {
    bytes
        .chunks(16)
        .enumerate()
        .map(|(i, chunk)| {
            let mut line = format!("{:08x} ", i * 16);
            for (j, b) in chunk.iter().enumerate() {
                if j == 8 {
                    line.push(' ');
                }
                write!(line, " {b:02x}").unwrap();
            }
            line
        })
        .collect()
}

fn render_golden(title: &str, bytes: &[u8]) -> String {
    let mut out = format!(
        "# {title}: {} bytes (length prefix, header, body).\n\
         # Written by `RINGLEADER_BLESS=1 cargo test -p ringleader-wire --test golden`;\n\
         # every field is checked independently in wire/tests/golden.rs.\n",
        bytes.len()
    );
    for line in hex_lines(bytes) {
        out.push_str(&line);
        out.push('\n');
    }
    out
}

/// Bytes of a golden file: `#` starts a comment; the first column (8 hex digits) is an offset.
fn parse_golden(text: &str) -> Vec<u8> {
    let mut out = Vec::new();
    for line in text.lines() {
        let line = line.split('#').next().unwrap_or("");
        for tok in line.split_whitespace() {
            match tok.len() {
                8 => {} // offset column
                2 => out.push(u8::from_str_radix(tok, 16).expect("hex byte")),
                _ => panic!("bad token {tok:?} in golden file"),
            }
        }
    }
    out
}

fn hex_diff(expected: &[u8], actual: &[u8]) -> String {
    let first = expected
        .iter()
        .zip(actual)
        .position(|(a, b)| a != b)
        .unwrap_or(expected.len().min(actual.len()));
    let mut out = format!(
        "expected {} bytes, got {}; first difference at offset {first} (0x{first:x})\n",
        expected.len(),
        actual.len()
    );
    let (e, a) = (hex_lines(expected), hex_lines(actual));
    let mut shown = 0;
    for i in 0..e.len().max(a.len()) {
        let (el, al) = (e.get(i), a.get(i));
        if el != al {
            if let Some(l) = el {
                writeln!(out, "  - {l}").unwrap();
            }
            if let Some(l) = al {
                writeln!(out, "  + {l}").unwrap();
            }
            shown += 1;
            if shown == 12 {
                out.push_str("  ... (more lines differ)\n");
                break;
            }
        }
    }
    out
}

/// Compare `actual` with `tests/golden/<stem>.hex` (or write it when blessing). Returns the golden
/// bytes, or a readable description of the mismatch.
fn check_golden(stem: &str, title: &str, actual: &[u8]) -> Result<Vec<u8>, String> {
    let path = golden_dir().join(format!("{stem}.hex"));
    if blessing() {
        std::fs::create_dir_all(golden_dir()).unwrap();
        std::fs::write(&path, render_golden(title, actual)).unwrap();
        return Ok(actual.to_vec());
    }
    let text = std::fs::read_to_string(&path).map_err(|e| {
        format!(
            "{}: {e}; run `RINGLEADER_BLESS=1 cargo test -p ringleader-wire --test golden` to \
             create it",
            path.display()
        )
    })?;
    let expected = parse_golden(&text);
    if expected == actual {
        Ok(expected)
    } else {
        Err(format!(
            "{title} differs from {}:\n{}(if the change is intended, re-bless with \
             RINGLEADER_BLESS=1 and review the diff)",
            path.display(),
            hex_diff(&expected, actual)
        ))
    }
}

fn run_golden(api: &GoldenApi) {
    let range = Versions::default()
        .get(api.api_key)
        .unwrap_or_else(|| panic!("{} is not served", api.name));
    let mut failures = Vec::new();
    for v in range.min..=range.max {
        let resp = (api.build)(v);
        let mut out = BytesMut::new();
        encode_response(CID, v, &resp, &mut out)
            .unwrap_or_else(|e| panic!("{} v{v} does not encode: {e:#}", api.name));
        let title = format!("{} v{v} response", api.name);
        match check_golden(&format!("{}_v{v:02}", api.file_stem), &title, &out) {
            Ok(golden) => {
                (api.walk)(&golden, v);
                // And the crate's decoder reads back what we built.
                let frame = Bytes::copy_from_slice(&golden[4..]);
                let (cid, back) = decode_response(api.api_key, v, &frame)
                    .unwrap_or_else(|e| panic!("{title}: decode_response: {e:#}"));
                assert_eq!(cid, CID);
                assert_eq!(back, resp, "{title}: decode_response round trip");
            }
            Err(e) => failures.push(e),
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}

fn golden_api(api_key: i16) -> &'static GoldenApi {
    GOLDEN_APIS.iter().find(|a| a.api_key == api_key).unwrap()
}

fn golden_variant(file_stem: &str) -> &'static GoldenApi {
    GOLDEN_VARIANTS
        .iter()
        .find(|a| a.file_stem == file_stem)
        .unwrap()
}

#[test]
fn golden_metadata_responses() {
    run_golden(golden_api(3));
}

#[test]
fn golden_find_coordinator_responses() {
    run_golden(golden_api(10));
}

#[test]
fn golden_api_versions_responses() {
    run_golden(golden_api(18));
}

#[test]
fn golden_create_topics_responses() {
    run_golden(golden_api(19));
}

#[test]
fn golden_delete_topics_responses() {
    run_golden(golden_api(20));
}

#[test]
fn golden_describe_configs_responses() {
    run_golden(golden_api(32));
}

#[test]
fn golden_alter_configs_responses() {
    run_golden(golden_api(33));
}

#[test]
fn golden_create_partitions_responses() {
    run_golden(golden_api(37));
}

#[test]
fn golden_incremental_alter_configs_responses() {
    run_golden(golden_api(44));
}

#[test]
fn golden_describe_cluster_responses() {
    run_golden(golden_api(60));
}

#[test]
fn golden_fetch_responses() {
    run_golden(golden_api(1));
}

#[test]
fn golden_list_offsets_responses() {
    run_golden(golden_api(2));
}

#[test]
fn golden_offset_commit_responses() {
    run_golden(golden_api(8));
}

#[test]
fn golden_offset_fetch_responses() {
    run_golden(golden_api(9));
}

#[test]
fn golden_join_group_responses() {
    run_golden(golden_api(11));
}

#[test]
fn golden_heartbeat_responses() {
    run_golden(golden_api(12));
}

#[test]
fn golden_leave_group_responses() {
    run_golden(golden_api(13));
}

#[test]
fn golden_sync_group_responses() {
    run_golden(golden_api(14));
}

#[test]
fn golden_describe_groups_responses() {
    run_golden(golden_api(15));
}

#[test]
fn golden_list_groups_responses() {
    run_golden(golden_api(16));
}

#[test]
fn golden_delete_groups_responses() {
    run_golden(golden_api(42));
}

#[test]
fn golden_offset_delete_responses() {
    run_golden(golden_api(47));
}

#[test]
fn golden_consumer_group_heartbeat_responses() {
    run_golden(golden_api(68));
}

#[test]
fn golden_consumer_group_heartbeat_error_responses() {
    run_golden(golden_variant("consumer_group_heartbeat_error"));
}

#[test]
fn golden_consumer_group_describe_responses() {
    run_golden(golden_api(69));
}

#[test]
fn golden_produce_responses() {
    run_golden(golden_api(0));
}

#[test]
fn golden_delete_records_responses() {
    run_golden(golden_api(21));
}

#[test]
fn golden_init_producer_id_responses() {
    run_golden(golden_api(22));
}

#[test]
fn golden_init_producer_id_error_responses() {
    run_golden(golden_variant("init_producer_id_error"));
}

#[test]
fn golden_add_partitions_to_txn_responses() {
    run_golden(golden_api(24));
}

#[test]
fn golden_add_offsets_to_txn_responses() {
    run_golden(golden_api(25));
}

#[test]
fn golden_end_txn_responses() {
    run_golden(golden_api(26));
}

#[test]
fn golden_txn_offset_commit_responses() {
    run_golden(golden_api(28));
}

#[test]
fn golden_describe_producers_responses() {
    run_golden(golden_api(61));
}

#[test]
fn golden_describe_transactions_responses() {
    run_golden(golden_api(65));
}

#[test]
fn golden_list_transactions_responses() {
    run_golden(golden_api(66));
}

#[test]
fn golden_update_features_responses() {
    run_golden(golden_api(57));
}

#[test]
fn golden_describe_user_scram_credentials_responses() {
    run_golden(golden_api(50));
}

#[test]
fn golden_alter_user_scram_credentials_responses() {
    run_golden(golden_api(51));
}

#[test]
fn golden_describe_client_quotas_responses() {
    run_golden(golden_api(48));
}

#[test]
fn golden_sasl_handshake_responses() {
    run_golden(golden_api(17));
}

#[test]
fn golden_sasl_authenticate_responses() {
    run_golden(golden_api(36));
}

#[test]
fn golden_describe_acls() {
    run_golden(golden_api(29));
}

#[test]
fn golden_create_acls() {
    run_golden(golden_api(30));
}

#[test]
fn golden_delete_acls() {
    run_golden(golden_api(31));
}

#[test]
fn golden_describe_quorum_responses() {
    run_golden(golden_api(55));
}

#[test]
fn golden_remove_raft_voter_responses() {
    run_golden(golden_api(81));
}

#[test]
fn golden_remove_raft_voter_error_responses() {
    run_golden(golden_variant("remove_raft_voter_error"));
}

#[test]
fn golden_add_raft_voter_responses() {
    run_golden(golden_api(80));
}

#[test]
fn golden_add_raft_voter_error_responses() {
    run_golden(golden_variant("add_raft_voter_error"));
}

#[test]
fn golden_elect_leaders_responses() {
    run_golden(golden_api(43));
}

#[test]
fn golden_elect_leaders_error_responses() {
    run_golden(golden_variant("elect_leaders_error"));
}

#[test]
fn golden_describe_log_dirs_responses() {
    run_golden(golden_api(35));
}

#[test]
fn golden_describe_log_dirs_error_responses() {
    run_golden(golden_variant("describe_log_dirs_error"));
}

#[test]
fn golden_alter_partition_reassignments_responses() {
    run_golden(golden_api(45));
}

#[test]
fn golden_alter_partition_reassignments_error_responses() {
    run_golden(golden_variant("alter_partition_reassignments_error"));
}

#[test]
fn golden_list_partition_reassignments_responses() {
    run_golden(golden_api(46));
}

#[test]
fn golden_list_partition_reassignments_error_responses() {
    run_golden(golden_variant("list_partition_reassignments_error"));
}

#[test]
fn every_served_api_has_golden_coverage_and_no_file_is_stale() {
    for r in SERVED {
        assert!(
            GOLDEN_APIS.iter().any(|a| a.api_key == r.api_key),
            "api key {} is served but has no golden response builder in wire/tests/golden.rs",
            r.api_key
        );
    }
    if blessing() {
        return;
    }
    let versions = Versions::default();
    for entry in std::fs::read_dir(golden_dir()).expect("tests/golden exists") {
        let name = entry.unwrap().file_name().into_string().unwrap();
        let stem = name
            .strip_suffix(".hex")
            .unwrap_or_else(|| panic!("stray file {name}"));
        if EXTRA_GOLDEN.contains(&stem) {
            continue;
        }
        let (api, ver) = stem
            .rsplit_once("_v")
            .unwrap_or_else(|| panic!("odd name {name}"));
        let api = GOLDEN_APIS
            .iter()
            .chain(GOLDEN_VARIANTS)
            .find(|a| a.file_stem == api)
            .unwrap_or_else(|| panic!("{name}: unknown api"));
        let v: i16 = ver.parse().unwrap();
        assert!(
            versions.supports(api.api_key, v),
            "{name} is stale: {} v{v} is no longer served",
            api.name
        );
    }
}

// ---------------------------------------------------------------------------------------------
// The KIP-511 fallback: ApiVersions at a version we do not know.

#[test]
fn api_versions_too_new_gets_the_v0_fallback_frame() {
    let versions = Versions::default();
    // What a newer client sends first: ApiVersions v5 (4.4+) with header v2 and a body we must
    // not need to parse.
    let mut e = Enc::request(18, 5, CID, Some("apache-kafka-java"), true);
    e.str("apache-kafka-java");
    e.str("4.4.0");
    e.nstr(Some(CLUSTER_ID));
    e.i32(NODE);
    e.tags();
    let frame = e.finish();
    let (header, err) = decode_request(&frame, &versions).unwrap_err();
    let header = header.expect("the prefix is readable");
    assert_eq!(
        (header.api_key, header.api_version, header.correlation_id),
        (18, 5, CID)
    );
    let range = versions.get(18).unwrap();
    assert_eq!(
        err,
        DecodeError::UnsupportedVersion {
            api_key: 18,
            version: 5,
            min: range.min,
            max: range.max
        }
    );

    let out = unsupported_version_frame(header.correlation_id, &versions);
    let golden = check_golden(
        "api_versions_unsupported_fallback",
        "ApiVersions fallback (v0, UNSUPPORTED_VERSION) for a v5 request",
        &out,
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let mut w = Walk::response(&golden, "ApiVersions fallback".into(), false, false);
    w.expect_i16("error_code", ResponseError::UnsupportedVersion.code());
    w.expect_array("api_keys", 1);
    w.expect_i16("api_key", 18);
    w.expect_i16("min_version", 0);
    w.expect_i16("max_version", 4);
    w.end(); // v0: no throttle, no tags
    let (cid, resp) = decode_response(18, 0, &Bytes::copy_from_slice(&golden[4..])).unwrap();
    assert_eq!(cid, CID);
    let Response::ApiVersions(resp) = resp else {
        unreachable!()
    };
    assert_eq!(resp.error_code, ResponseError::UnsupportedVersion.code());
}

// ---------------------------------------------------------------------------------------------
// The Produce min-version quirk (KAFKA-18659, reference §1.3): ApiVersions advertises Produce from
// v0 because old librdkafka refuses to produce otherwise, but v0-2 requests are closed. The golden
// ApiVersions body above is a fixed list (`ADVERTISED`); this checks the live answer.

#[test]
fn produce_is_advertised_from_v0_but_v0_to_v2_are_closed() {
    let versions = Versions::default();
    let served = versions.get(0).expect("Produce is served");
    assert_eq!((served.min, served.max), (3, 13), "served Produce range");
    // Produce 0-13; every other key exactly its served range, in key order.
    let want: Vec<(i16, i16, i16)> = versions
        .list()
        .iter()
        .map(|r| (r.api_key, if r.api_key == 0 { 0 } else { r.min }, r.max))
        .collect();
    assert_eq!(want[0], (0, 0, 13));

    for v in 0..=4i16 {
        let req = ApiVersionsRequest::default()
            .with_client_software_name(s("librdkafka"))
            .with_client_software_version(s("2.16.0"));
        let resp = wire::api_versions::response(&req, v, &versions);
        assert_eq!(resp.error_code, 0, "ApiVersions v{v}");
        let got: Vec<(i16, i16, i16)> = resp
            .api_keys
            .iter()
            .map(|k| (k.api_key, k.min_version, k.max_version))
            .collect();
        assert_eq!(got, want, "ApiVersions v{v}: advertised ranges");

        // The same on the wire, read with the independent walker (header v0 always).
        let mut out = BytesMut::new();
        encode_response(CID, v, &Response::ApiVersions(resp), &mut out).unwrap();
        let flex = v >= 3;
        let mut w = Walk::response(&out, format!("live ApiVersions v{v}"), false, flex);
        w.expect_i16("error_code", 0);
        w.expect_array("api_keys", want.len());
        for &(k, min, max) in &want {
            w.expect_i16("api_keys.api_key", k);
            w.expect_i16("api_keys.min_version", min);
            w.expect_i16("api_keys.max_version", max);
            w.expect_no_tags("api_keys tags");
        }
        if v >= 1 {
            w.expect_i32("throttle_time_ms", 0);
        }
        w.expect_no_tags("top-level tags");
        w.end();
    }

    // A client that believes the advertised minimum: Produce v0-2 (acks, timeout, one topic with
    // an empty message set) is refused before its body is read, so the connection is closed.
    // v14 (beyond the table) likewise.
    for v in [0i16, 1, 2, 14] {
        let mut e = Enc::request(0, v, CID, Some("rdkafka"), false);
        e.i16(1);
        e.i32(30_000);
        e.arr(1);
        e.str(TOPIC);
        e.arr(1);
        e.i32(0);
        e.bytes(&[]);
        let (header, err) = decode_request(&e.finish(), &versions).unwrap_err();
        let header = header.expect("the prefix is readable");
        assert_eq!(
            (header.api_key, header.api_version, header.correlation_id),
            (0, v, CID)
        );
        assert_eq!(
            err,
            DecodeError::UnsupportedVersion {
                api_key: 0,
                version: v,
                min: 3,
                max: 13
            },
            "Produce v{v}"
        );
    }
}

// ---------------------------------------------------------------------------------------------
// Requests as clients write them: hand-built bytes → decode_request → expected values.

/// An independent request writer (header v1/v2 and the classic/compact primitives).
struct Enc {
    b: Vec<u8>,
    flex: bool,
}

impl Enc {
    fn request(api_key: i16, v: i16, cid: i32, client_id: Option<&str>, flex: bool) -> Self {
        let mut e = Enc {
            b: Vec::new(),
            flex: false,
        };
        e.i16(api_key);
        e.i16(v);
        e.i32(cid);
        e.nstr(client_id); // header client_id is always a classic string
        e.flex = flex;
        e.tags(); // header v2 tagged fields
        e
    }
    fn i8(&mut self, x: i8) {
        self.b.push(x as u8);
    }
    fn i16(&mut self, x: i16) {
        self.b.extend_from_slice(&x.to_be_bytes());
    }
    fn i32(&mut self, x: i32) {
        self.b.extend_from_slice(&x.to_be_bytes());
    }
    fn bool(&mut self, x: bool) {
        self.b.push(x as u8);
    }
    fn uuid(&mut self, x: [u8; 16]) {
        self.b.extend_from_slice(&x);
    }
    fn u16(&mut self, x: u16) {
        self.b.extend_from_slice(&x.to_be_bytes());
    }
    fn i64(&mut self, x: i64) {
        self.b.extend_from_slice(&x.to_be_bytes());
    }
    fn bytes(&mut self, x: &[u8]) {
        if self.flex {
            self.uvarint(x.len() as u32 + 1);
        } else {
            self.i32(x.len() as i32);
        }
        self.b.extend_from_slice(x);
    }
    fn uvarint(&mut self, mut x: u32) {
        while x >= 0x80 {
            self.b.push((x as u8) | 0x80);
            x >>= 7;
        }
        self.b.push(x as u8);
    }
    fn str(&mut self, x: &str) {
        self.nstr(Some(x));
    }
    fn nstr(&mut self, x: Option<&str>) {
        match (x, self.flex) {
            (None, false) => self.i16(-1),
            (None, true) => self.uvarint(0),
            (Some(x), false) => {
                self.i16(x.len() as i16);
                self.b.extend_from_slice(x.as_bytes());
            }
            (Some(x), true) => {
                self.uvarint(x.len() as u32 + 1);
                self.b.extend_from_slice(x.as_bytes());
            }
        }
    }
    fn arr(&mut self, n: usize) {
        self.narr(Some(n));
    }
    fn narr(&mut self, n: Option<usize>) {
        match (n, self.flex) {
            (None, false) => self.i32(-1),
            (None, true) => self.uvarint(0),
            (Some(n), false) => self.i32(n as i32),
            (Some(n), true) => self.uvarint(n as u32 + 1),
        }
    }
    /// An empty tagged-field section (flexible versions only).
    fn tags(&mut self) {
        if self.flex {
            self.uvarint(0);
        }
    }
    fn finish(self) -> Bytes {
        Bytes::from(self.b)
    }
}

/// Decode hand-built `frame` and compare with the expected header and body; then check that the
/// client-side encoder writes exactly the same bytes.
fn check_request(frame: Bytes, client_id: Option<&str>, version: i16, expect: Request) {
    let label = format!("api {} v{version}", expect.api_key());
    let (header, req) = decode_request(&frame, &Versions::default())
        .unwrap_or_else(|(_, e)| panic!("{label}: {e}"));
    assert_eq!(
        header,
        RequestHeader {
            api_key: expect.api_key(),
            api_version: version,
            correlation_id: CID,
            client_id: client_id.map(str::to_owned),
        },
        "{label}: header"
    );
    assert_eq!(req, expect, "{label}: body");
    let mut out = BytesMut::new();
    encode_request(&header, &req, &mut out).unwrap();
    assert_eq!(&out[4..], &frame[..], "{label}: encode_request bytes");
}

#[test]
fn requests_metadata() {
    use metadata_request::MetadataRequestTopic;
    // v0: a topic list (empty would mean all topics).
    let mut e = Enc::request(3, 0, CID, Some("rdkafka"), false);
    e.arr(2);
    e.str(TOPIC);
    e.str("payments");
    let expect = MetadataRequest::default().with_topics(Some(vec![
        MetadataRequestTopic::default().with_name(Some(s(TOPIC).into())),
        MetadataRequestTopic::default().with_name(Some(s("payments").into())),
    ]));
    check_request(e.finish(), Some("rdkafka"), 0, Request::Metadata(expect));

    // v4: null topics = all topics, no auto-creation.
    let mut e = Enc::request(3, 4, CID, Some("kafka-python"), false);
    e.narr(None);
    e.bool(false);
    let expect = MetadataRequest::default()
        .with_topics(None)
        .with_allow_auto_topic_creation(false);
    check_request(
        e.finish(),
        Some("kafka-python"),
        4,
        Request::Metadata(expect),
    );

    // v13 (flexible): one topic by name, one by id with a null name.
    let mut e = Enc::request(3, 13, CID, Some("rdkafka"), true);
    e.arr(2);
    e.uuid([0; 16]);
    e.str(TOPIC);
    e.tags();
    e.uuid(TOPIC_ID);
    e.nstr(None);
    e.tags();
    e.bool(false); // allow_auto_topic_creation
    e.bool(true); // include_topic_authorized_operations
    e.tags();
    let expect = MetadataRequest::default()
        .with_topics(Some(vec![
            MetadataRequestTopic::default().with_name(Some(s(TOPIC).into())),
            MetadataRequestTopic::default()
                .with_topic_id(uuid(TOPIC_ID))
                .with_name(None),
        ]))
        .with_allow_auto_topic_creation(false)
        .with_include_topic_authorized_operations(true);
    check_request(e.finish(), Some("rdkafka"), 13, Request::Metadata(expect));
}

#[test]
fn requests_find_coordinator() {
    let mut e = Enc::request(10, 0, CID, None, false);
    e.str("g-classic");
    let expect = FindCoordinatorRequest::default().with_key(s("g-classic"));
    check_request(e.finish(), None, 0, Request::FindCoordinator(expect));

    let mut e = Enc::request(10, 3, CID, Some("kafkajs"), true);
    e.str("tx-1");
    e.i8(1); // transaction
    e.tags();
    let expect = FindCoordinatorRequest::default()
        .with_key(s("tx-1"))
        .with_key_type(1);
    check_request(
        e.finish(),
        Some("kafkajs"),
        3,
        Request::FindCoordinator(expect),
    );

    let mut e = Enc::request(10, 6, CID, Some("kafka-python"), true);
    e.i8(0);
    e.arr(2);
    e.str("g-classic");
    e.str("g-consumer");
    e.tags();
    let expect = FindCoordinatorRequest::default()
        .with_key_type(0)
        .with_coordinator_keys(vec![s("g-classic"), s("g-consumer")]);
    check_request(
        e.finish(),
        Some("kafka-python"),
        6,
        Request::FindCoordinator(expect),
    );
}

#[test]
fn requests_api_versions() {
    let e = Enc::request(18, 0, CID, Some("aiokafka"), false);
    check_request(
        e.finish(),
        Some("aiokafka"),
        0,
        Request::ApiVersions(ApiVersionsRequest::default()),
    );

    for (v, name, version) in [
        (3, "librdkafka", "2.16.0"),
        (4, "apache-kafka-java", "4.1.0"),
    ] {
        let mut e = Enc::request(18, v, CID, Some("rdkafka"), true);
        e.str(name);
        e.str(version);
        e.tags();
        let expect = ApiVersionsRequest::default()
            .with_client_software_name(s(name))
            .with_client_software_version(s(version));
        check_request(e.finish(), Some("rdkafka"), v, Request::ApiVersions(expect));
    }
}

#[test]
fn requests_create_topics() {
    use create_topics_request::*;
    for v in [2i16, 7] {
        let flex = v >= 5;
        let mut e = Enc::request(19, v, CID, Some("adminclient-1"), flex);
        e.arr(2);
        e.str(TOPIC);
        e.i32(2);
        e.i16(1);
        e.arr(0); // assignments
        e.arr(2); // configs
        e.str("cleanup.policy");
        e.nstr(Some("delete"));
        e.tags();
        e.str("retention.ms");
        e.nstr(Some("86400000"));
        e.tags();
        e.tags();
        e.str("manual");
        e.i32(-1);
        e.i16(-1);
        e.arr(2);
        for p in 0..2 {
            e.i32(p);
            e.arr(1);
            e.i32(NODE);
            e.tags();
        }
        e.arr(1);
        e.str("min.insync.replicas");
        e.nstr(None);
        e.tags();
        e.tags();
        e.i32(30_000);
        e.bool(true);
        e.tags();
        let expect = CreateTopicsRequest::default()
            .with_topics(vec![
                CreatableTopic::default()
                    .with_name(s(TOPIC).into())
                    .with_num_partitions(2)
                    .with_replication_factor(1)
                    .with_configs(vec![
                        CreatableTopicConfig::default()
                            .with_name(s("cleanup.policy"))
                            .with_value(Some(s("delete"))),
                        CreatableTopicConfig::default()
                            .with_name(s("retention.ms"))
                            .with_value(Some(s("86400000"))),
                    ]),
                CreatableTopic::default()
                    .with_name(s("manual").into())
                    .with_num_partitions(-1)
                    .with_replication_factor(-1)
                    .with_assignments(
                        (0..2)
                            .map(|p| {
                                CreatableReplicaAssignment::default()
                                    .with_partition_index(p)
                                    .with_broker_ids(vec![BrokerId(NODE)])
                            })
                            .collect(),
                    )
                    .with_configs(vec![CreatableTopicConfig::default()
                        .with_name(s("min.insync.replicas"))
                        .with_value(None)]),
            ])
            .with_timeout_ms(30_000)
            .with_validate_only(true);
        check_request(
            e.finish(),
            Some("adminclient-1"),
            v,
            Request::CreateTopics(expect),
        );
    }
}

#[test]
fn requests_delete_topics() {
    use delete_topics_request::DeleteTopicState;
    let mut e = Enc::request(20, 1, CID, Some("adminclient-1"), false);
    e.arr(2);
    e.str(TOPIC);
    e.str("old-events");
    e.i32(15_000);
    let expect = DeleteTopicsRequest::default()
        .with_topic_names(vec![s(TOPIC).into(), s("old-events").into()])
        .with_timeout_ms(15_000);
    check_request(
        e.finish(),
        Some("adminclient-1"),
        1,
        Request::DeleteTopics(expect),
    );

    let mut e = Enc::request(20, 6, CID, Some("adminclient-1"), true);
    e.arr(2);
    e.nstr(Some(TOPIC));
    e.uuid([0; 16]);
    e.tags();
    e.nstr(None);
    e.uuid(GHOST_TOPIC_ID);
    e.tags();
    e.i32(15_000);
    e.tags();
    let expect = DeleteTopicsRequest::default()
        .with_topics(vec![
            DeleteTopicState::default().with_name(Some(s(TOPIC).into())),
            DeleteTopicState::default()
                .with_name(None)
                .with_topic_id(uuid(GHOST_TOPIC_ID)),
        ])
        .with_timeout_ms(15_000);
    check_request(
        e.finish(),
        Some("adminclient-1"),
        6,
        Request::DeleteTopics(expect),
    );
}

#[test]
fn requests_describe_configs() {
    use describe_configs_request::DescribeConfigsResource;
    for v in [1i16, 4] {
        let flex = v >= 4;
        let mut e = Enc::request(32, v, CID, Some("adminclient-1"), flex);
        e.arr(2);
        e.i8(2); // TOPIC
        e.str(TOPIC);
        e.narr(None); // all keys
        e.tags();
        e.i8(4); // BROKER
        e.str("1");
        e.arr(2);
        e.str("log.retention.hours");
        e.str("ssl.keystore.password");
        e.tags();
        e.bool(true); // include_synonyms
        if v >= 3 {
            e.bool(true); // include_documentation
        }
        e.tags();
        let mut expect = DescribeConfigsRequest::default()
            .with_resources(vec![
                DescribeConfigsResource::default()
                    .with_resource_type(2)
                    .with_resource_name(s(TOPIC))
                    .with_configuration_keys(None),
                DescribeConfigsResource::default()
                    .with_resource_type(4)
                    .with_resource_name(s("1"))
                    .with_configuration_keys(Some(vec![
                        s("log.retention.hours"),
                        s("ssl.keystore.password"),
                    ])),
            ])
            .with_include_synonyms(true);
        if v >= 3 {
            expect.include_documentation = true;
        }
        check_request(
            e.finish(),
            Some("adminclient-1"),
            v,
            Request::DescribeConfigs(expect),
        );
    }
}

#[test]
fn requests_alter_configs() {
    use alter_configs_request::*;
    // The legacy, whole-set AlterConfigs: a topic (one value null) and a broker.
    for v in [0i16, 1, 2] {
        let flex = v >= 2;
        let mut e = Enc::request(33, v, CID, Some("adminclient-1"), flex);
        e.arr(2);
        e.i8(2); // TOPIC
        e.str(TOPIC);
        e.arr(2);
        e.str("retention.ms");
        e.nstr(Some("86400000"));
        e.tags();
        e.str("cleanup.policy");
        e.nstr(None);
        e.tags();
        e.tags();
        e.i8(4); // BROKER
        e.str("1");
        e.arr(1);
        e.str("log.cleaner.threads");
        e.nstr(Some("2"));
        e.tags();
        e.tags();
        e.bool(true); // validate_only
        e.tags();
        let expect = AlterConfigsRequest::default()
            .with_resources(vec![
                AlterConfigsResource::default()
                    .with_resource_type(2)
                    .with_resource_name(s(TOPIC))
                    .with_configs(vec![
                        AlterableConfig::default()
                            .with_name(s("retention.ms"))
                            .with_value(Some(s("86400000"))),
                        AlterableConfig::default()
                            .with_name(s("cleanup.policy"))
                            .with_value(None),
                    ]),
                AlterConfigsResource::default()
                    .with_resource_type(4)
                    .with_resource_name(s("1"))
                    .with_configs(vec![AlterableConfig::default()
                        .with_name(s("log.cleaner.threads"))
                        .with_value(Some(s("2")))]),
            ])
            .with_validate_only(true);
        check_request(
            e.finish(),
            Some("adminclient-1"),
            v,
            Request::AlterConfigs(expect),
        );
    }
}

#[test]
fn requests_create_partitions() {
    use create_partitions_request::*;
    // orders grows to 4 with the placement left to the broker (null assignments); audit-log grows
    // to 3 with the two new partitions placed by hand.
    for v in [0i16, 1, 2, 3] {
        let flex = v >= 2;
        let mut e = Enc::request(37, v, CID, Some("adminclient-1"), flex);
        e.arr(2);
        e.str(TOPIC);
        e.i32(4);
        e.narr(None);
        e.tags();
        e.str(AUDIT_TOPIC);
        e.i32(3);
        e.arr(2);
        for brokers in [[NODE, NODE2], [NODE2, NODE]] {
            e.arr(2);
            e.i32(brokers[0]);
            e.i32(brokers[1]);
            e.tags();
        }
        e.tags();
        e.i32(30_000);
        e.bool(false); // validate_only
        e.tags();
        let expect = CreatePartitionsRequest::default()
            .with_topics(vec![
                CreatePartitionsTopic::default()
                    .with_name(s(TOPIC).into())
                    .with_count(4)
                    .with_assignments(None),
                CreatePartitionsTopic::default()
                    .with_name(s(AUDIT_TOPIC).into())
                    .with_count(3)
                    .with_assignments(Some(vec![
                        CreatePartitionsAssignment::default()
                            .with_broker_ids(vec![BrokerId(NODE), BrokerId(NODE2)]),
                        CreatePartitionsAssignment::default()
                            .with_broker_ids(vec![BrokerId(NODE2), BrokerId(NODE)]),
                    ])),
            ])
            .with_timeout_ms(30_000)
            .with_validate_only(false);
        check_request(
            e.finish(),
            Some("adminclient-1"),
            v,
            Request::CreatePartitions(expect),
        );
    }
}

#[test]
fn requests_incremental_alter_configs() {
    use incremental_alter_configs_request::*;
    // ConfigOperation: 0 SET, 1 DELETE (null value), 2 APPEND, 3 SUBTRACT.
    let topic_ops: [(&str, i8, Option<&str>); 3] = [
        ("retention.ms", 0, Some("86400000")),
        ("cleanup.policy", 2, Some("compact")),
        ("min.insync.replicas", 1, None),
    ];
    for v in [0i16, 1] {
        let flex = v >= 1;
        let mut e = Enc::request(44, v, CID, Some("adminclient-1"), flex);
        e.arr(2);
        e.i8(2); // TOPIC
        e.str(TOPIC);
        e.arr(topic_ops.len());
        for (name, op, value) in topic_ops {
            e.str(name);
            e.i8(op);
            e.nstr(value);
            e.tags();
        }
        e.tags();
        e.i8(4); // BROKER
        e.str("1");
        e.arr(1);
        e.str("log.cleaner.threads");
        e.i8(3);
        e.nstr(Some("1"));
        e.tags();
        e.tags();
        e.bool(false); // validate_only
        e.tags();
        let expect = IncrementalAlterConfigsRequest::default()
            .with_resources(vec![
                AlterConfigsResource::default()
                    .with_resource_type(2)
                    .with_resource_name(s(TOPIC))
                    .with_configs(
                        topic_ops
                            .iter()
                            .map(|&(name, op, value)| {
                                AlterableConfig::default()
                                    .with_name(s(name))
                                    .with_config_operation(op)
                                    .with_value(value.map(s))
                            })
                            .collect(),
                    ),
                AlterConfigsResource::default()
                    .with_resource_type(4)
                    .with_resource_name(s("1"))
                    .with_configs(vec![AlterableConfig::default()
                        .with_name(s("log.cleaner.threads"))
                        .with_config_operation(3)
                        .with_value(Some(s("1")))]),
            ])
            .with_validate_only(false);
        check_request(
            e.finish(),
            Some("adminclient-1"),
            v,
            Request::IncrementalAlterConfigs(expect),
        );
    }
}

#[test]
fn requests_describe_cluster() {
    let mut e = Enc::request(60, 0, CID, Some("adminclient-1"), true);
    e.bool(true);
    e.tags();
    let expect = DescribeClusterRequest::default().with_include_cluster_authorized_operations(true);
    check_request(
        e.finish(),
        Some("adminclient-1"),
        0,
        Request::DescribeCluster(expect),
    );

    let mut e = Enc::request(60, 2, CID, Some("adminclient-1"), true);
    e.bool(false);
    e.i8(1);
    e.bool(true);
    e.tags();
    let expect = DescribeClusterRequest::default()
        .with_include_cluster_authorized_operations(false)
        .with_endpoint_type(1)
        .with_include_fenced_brokers(true);
    check_request(
        e.finish(),
        Some("adminclient-1"),
        2,
        Request::DescribeCluster(expect),
    );
}

#[test]
fn requests_fetch() {
    use fetch_request::*;
    // v4 (oldest served): by topic name; no sessions, leader epochs or log start offset yet.
    let mut e = Enc::request(1, 4, CID, Some("rdkafka"), false);
    e.i32(-1); // replica_id: a consumer
    e.i32(500); // max_wait_ms
    e.i32(1); // min_bytes
    e.i32(52_428_800); // max_bytes
    e.i8(1); // isolation_level: read_committed
    e.arr(1);
    e.str(TOPIC);
    e.arr(2);
    for (p, offset) in [(0, HIGH_WATERMARK), (1, 17)] {
        e.i32(p);
        e.i64(offset);
        e.i32(1_048_576);
    }
    let expect = FetchRequest::default()
        .with_replica_id(BrokerId(-1))
        .with_max_wait_ms(500)
        .with_min_bytes(1)
        .with_max_bytes(52_428_800)
        .with_isolation_level(1)
        .with_topics(vec![FetchTopic::default()
            .with_topic(s(TOPIC).into())
            .with_partitions(
                [(0, HIGH_WATERMARK), (1, 17)]
                    .into_iter()
                    .map(|(p, offset)| {
                        FetchPartition::default()
                            .with_partition(p)
                            .with_fetch_offset(offset)
                            .with_partition_max_bytes(1_048_576)
                    })
                    .collect(),
            )]);
    check_request(e.finish(), Some("rdkafka"), 4, Request::Fetch(expect));

    // v18 (flexible, topic ids, no ReplicaId field): an incremental fetch session that forgets
    // audit-log and names the consumer's rack.
    let mut e = Enc::request(1, 18, CID, Some("consumer-g-classic-2"), true);
    e.i32(500);
    e.i32(1);
    e.i32(52_428_800);
    e.i8(1);
    e.i32(FETCH_SESSION);
    e.i32(3); // session_epoch
    e.arr(1);
    e.uuid(TOPIC_ID);
    e.arr(2);
    for (p, offset) in [(0, HIGH_WATERMARK), (1, 17)] {
        e.i32(p);
        e.i32(LEADER_EPOCH + p); // current_leader_epoch
        e.i64(offset);
        e.i32(-1); // last_fetched_epoch
        e.i64(-1); // log_start_offset
        e.i32(1_048_576);
        e.tags();
    }
    e.tags();
    e.arr(1); // forgotten_topics_data
    e.uuid(AUDIT_TOPIC_ID);
    e.arr(1);
    e.i32(0);
    e.tags();
    e.str(RACK);
    e.tags();
    let expect = FetchRequest::default()
        .with_max_wait_ms(500)
        .with_min_bytes(1)
        .with_max_bytes(52_428_800)
        .with_isolation_level(1)
        .with_session_id(FETCH_SESSION)
        .with_session_epoch(3)
        .with_topics(vec![FetchTopic::default()
            .with_topic_id(uuid(TOPIC_ID))
            .with_partitions(
                [(0, HIGH_WATERMARK), (1, 17)]
                    .into_iter()
                    .map(|(p, offset)| {
                        FetchPartition::default()
                            .with_partition(p)
                            .with_current_leader_epoch(LEADER_EPOCH + p)
                            .with_fetch_offset(offset)
                            .with_last_fetched_epoch(-1)
                            .with_log_start_offset(-1)
                            .with_partition_max_bytes(1_048_576)
                    })
                    .collect(),
            )])
        .with_forgotten_topics_data(vec![ForgottenTopic::default()
            .with_topic_id(uuid(AUDIT_TOPIC_ID))
            .with_partitions(vec![0])])
        .with_rack_id(s(RACK));
    check_request(
        e.finish(),
        Some("consumer-g-classic-2"),
        18,
        Request::Fetch(expect),
    );
}

#[test]
fn requests_list_offsets() {
    use list_offsets_request::*;
    // v1: latest offset of one partition.
    let mut e = Enc::request(2, 1, CID, Some("kafka-python"), false);
    e.i32(-1);
    e.arr(1);
    e.str(TOPIC);
    e.arr(1);
    e.i32(0);
    e.i64(-1);
    let expect = ListOffsetsRequest::default()
        .with_replica_id(BrokerId(-1))
        .with_topics(vec![ListOffsetsTopic::default()
            .with_name(s(TOPIC).into())
            .with_partitions(vec![ListOffsetsPartition::default()
                .with_partition_index(0)
                .with_timestamp(-1)])]);
    check_request(
        e.finish(),
        Some("kafka-python"),
        1,
        Request::ListOffsets(expect),
    );

    // v10: read_committed, leader epochs, earliest (-2) and max-timestamp (-3), a timeout.
    let mut e = Enc::request(2, 10, CID, Some("adminclient-1"), true);
    e.i32(-1);
    e.i8(1);
    e.arr(1);
    e.str(TOPIC);
    e.arr(2);
    for (p, ts) in [(0, -2i64), (1, -3)] {
        e.i32(p);
        e.i32(LEADER_EPOCH + p);
        e.i64(ts);
        e.tags();
    }
    e.tags();
    e.i32(30_000);
    e.tags();
    let expect = ListOffsetsRequest::default()
        .with_replica_id(BrokerId(-1))
        .with_isolation_level(1)
        .with_topics(vec![ListOffsetsTopic::default()
            .with_name(s(TOPIC).into())
            .with_partitions(vec![
                ListOffsetsPartition::default()
                    .with_partition_index(0)
                    .with_current_leader_epoch(LEADER_EPOCH)
                    .with_timestamp(-2),
                ListOffsetsPartition::default()
                    .with_partition_index(1)
                    .with_current_leader_epoch(LEADER_EPOCH + 1)
                    .with_timestamp(-3),
            ])])
        .with_timeout_ms(30_000);
    check_request(
        e.finish(),
        Some("adminclient-1"),
        10,
        Request::ListOffsets(expect),
    );
}

#[test]
fn requests_offset_commit() {
    use offset_commit_request::*;
    // v2: generation, member, RetentionTimeMs (-1 = broker default); metadata "" and null.
    let mut e = Enc::request(8, 2, CID, Some("kafka-python"), false);
    e.str(GROUP);
    e.i32(GENERATION);
    e.str(MEMBERS[1].id);
    e.i64(-1);
    e.arr(1);
    e.str(TOPIC);
    e.arr(2);
    e.i32(0);
    e.i64(HIGH_WATERMARK);
    e.nstr(Some(""));
    e.i32(1);
    e.i64(17);
    e.nstr(None);
    let expect = OffsetCommitRequest::default()
        .with_group_id(s(GROUP).into())
        .with_generation_id_or_member_epoch(GENERATION)
        .with_member_id(s(MEMBERS[1].id))
        .with_retention_time_ms(-1)
        .with_topics(vec![OffsetCommitRequestTopic::default()
            .with_name(s(TOPIC).into())
            .with_partitions(vec![
                OffsetCommitRequestPartition::default()
                    .with_partition_index(0)
                    .with_committed_offset(HIGH_WATERMARK)
                    .with_committed_metadata(Some(s(""))),
                OffsetCommitRequestPartition::default()
                    .with_partition_index(1)
                    .with_committed_offset(17)
                    .with_committed_metadata(None),
            ])]);
    check_request(
        e.finish(),
        Some("kafka-python"),
        2,
        Request::OffsetCommit(expect),
    );

    // v9 (flexible): static member, leader epochs, two topics.
    let mut e = Enc::request(8, 9, CID, Some("rdkafka"), true);
    e.str(GROUP);
    e.i32(GENERATION);
    e.str(MEMBERS[0].id);
    e.nstr(MEMBERS[0].instance);
    e.arr(2);
    e.str(TOPIC);
    e.arr(1);
    e.i32(0);
    e.i64(HIGH_WATERMARK);
    e.i32(LEADER_EPOCH);
    e.nstr(Some(""));
    e.tags();
    e.tags();
    e.str(AUDIT_TOPIC);
    e.arr(1);
    e.i32(0);
    e.i64(5);
    e.i32(0);
    e.nstr(Some("checkpoint-5"));
    e.tags();
    e.tags();
    e.tags();
    let expect = OffsetCommitRequest::default()
        .with_group_id(s(GROUP).into())
        .with_generation_id_or_member_epoch(GENERATION)
        .with_member_id(s(MEMBERS[0].id))
        .with_group_instance_id(MEMBERS[0].instance.map(s))
        .with_topics(vec![
            OffsetCommitRequestTopic::default()
                .with_name(s(TOPIC).into())
                .with_partitions(vec![OffsetCommitRequestPartition::default()
                    .with_partition_index(0)
                    .with_committed_offset(HIGH_WATERMARK)
                    .with_committed_leader_epoch(LEADER_EPOCH)
                    .with_committed_metadata(Some(s("")))]),
            OffsetCommitRequestTopic::default()
                .with_name(s(AUDIT_TOPIC).into())
                .with_partitions(vec![OffsetCommitRequestPartition::default()
                    .with_partition_index(0)
                    .with_committed_offset(5)
                    .with_committed_leader_epoch(0)
                    .with_committed_metadata(Some(s("checkpoint-5")))]),
        ]);
    check_request(
        e.finish(),
        Some("rdkafka"),
        9,
        Request::OffsetCommit(expect),
    );
}

#[test]
fn requests_offset_fetch() {
    use offset_fetch_request::*;
    // v1: one group, explicit partitions (null topics only from v2).
    let mut e = Enc::request(9, 1, CID, Some("kafka-python"), false);
    e.str(GROUP);
    e.arr(1);
    e.str(TOPIC);
    e.arr(2);
    e.i32(0);
    e.i32(1);
    let expect = OffsetFetchRequest::default()
        .with_group_id(s(GROUP).into())
        .with_topics(Some(vec![OffsetFetchRequestTopic::default()
            .with_name(s(TOPIC).into())
            .with_partition_indexes(vec![0, 1])]));
    check_request(
        e.finish(),
        Some("kafka-python"),
        1,
        Request::OffsetFetch(expect),
    );

    // v7 (last single-group version): null topics = all, RequireStable.
    let mut e = Enc::request(9, 7, CID, Some("rdkafka"), true);
    e.str(GROUP);
    e.narr(None);
    e.bool(true);
    e.tags();
    let expect = OffsetFetchRequest::default()
        .with_group_id(s(GROUP).into())
        .with_topics(None)
        .with_require_stable(true);
    check_request(e.finish(), Some("rdkafka"), 7, Request::OffsetFetch(expect));

    // v9: a KIP-848 member with its epoch and a classic group with all topics.
    let member = "xW2ZGvWPQ6iMq6Tb0YwB8A";
    let mut e = Enc::request(9, 9, CID, Some("consumer-g-consumer-1"), true);
    e.arr(2);
    e.str("g-consumer");
    e.nstr(Some(member));
    e.i32(5);
    e.narr(Some(1));
    e.str(TOPIC);
    e.arr(2);
    e.i32(0);
    e.i32(1);
    e.tags();
    e.tags();
    e.str(GROUP);
    e.nstr(None);
    e.i32(-1);
    e.narr(None);
    e.tags();
    e.bool(true);
    e.tags();
    let expect = OffsetFetchRequest::default()
        .with_groups(vec![
            OffsetFetchRequestGroup::default()
                .with_group_id(s("g-consumer").into())
                .with_member_id(Some(s(member)))
                .with_member_epoch(5)
                .with_topics(Some(vec![OffsetFetchRequestTopics::default()
                    .with_name(s(TOPIC).into())
                    .with_partition_indexes(vec![0, 1])])),
            OffsetFetchRequestGroup::default()
                .with_group_id(s(GROUP).into())
                .with_member_id(None)
                .with_member_epoch(-1)
                .with_topics(None),
        ])
        .with_require_stable(true);
    check_request(
        e.finish(),
        Some("consumer-g-consumer-1"),
        9,
        Request::OffsetFetch(expect),
    );
}

#[test]
fn requests_join_group() {
    use join_group_request::*;
    let protocols = |v: &[(&str, Vec<u8>)]| {
        v.iter()
            .map(|(name, meta)| {
                JoinGroupRequestProtocol::default()
                    .with_name(s(name))
                    .with_metadata(Bytes::from(meta.clone()))
            })
            .collect::<Vec<_>>()
    };
    let metas = [
        (ASSIGNOR, subscription(&[TOPIC])),
        ("roundrobin", subscription(&[TOPIC])),
    ];

    // v0 (old librdkafka with GSSAPI): no rebalance timeout, empty member id.
    let mut e = Enc::request(11, 0, CID, Some("rdkafka"), false);
    e.str(GROUP);
    e.i32(10_000);
    e.str("");
    e.str(PROTOCOL_TYPE);
    e.arr(2);
    for (name, meta) in &metas {
        e.str(name);
        e.bytes(meta);
    }
    let expect = JoinGroupRequest::default()
        .with_group_id(s(GROUP).into())
        .with_session_timeout_ms(10_000)
        .with_member_id(s(""))
        .with_protocol_type(s(PROTOCOL_TYPE))
        .with_protocols(protocols(&metas));
    check_request(e.finish(), Some("rdkafka"), 0, Request::JoinGroup(expect));

    // v9 (flexible): static member re-joining with its id, instance id and a reason.
    let reason =
        "rebalance failed due to 'The group is rebalancing' (RebalanceInProgressException)";
    let mut e = Enc::request(11, 9, CID, Some("rdkafka"), true);
    e.str(GROUP);
    e.i32(45_000);
    e.i32(300_000);
    e.str(MEMBERS[0].id);
    e.nstr(MEMBERS[0].instance);
    e.str(PROTOCOL_TYPE);
    e.arr(2);
    for (name, meta) in &metas {
        e.str(name);
        e.bytes(meta);
        e.tags();
    }
    e.nstr(Some(reason));
    e.tags();
    let expect = JoinGroupRequest::default()
        .with_group_id(s(GROUP).into())
        .with_session_timeout_ms(45_000)
        .with_rebalance_timeout_ms(300_000)
        .with_member_id(s(MEMBERS[0].id))
        .with_group_instance_id(MEMBERS[0].instance.map(s))
        .with_protocol_type(s(PROTOCOL_TYPE))
        .with_protocols(protocols(&metas))
        .with_reason(Some(s(reason)));
    check_request(e.finish(), Some("rdkafka"), 9, Request::JoinGroup(expect));
}

#[test]
fn requests_heartbeat() {
    let mut e = Enc::request(12, 0, CID, Some("kafka-python"), false);
    e.str(GROUP);
    e.i32(GENERATION);
    e.str(MEMBERS[1].id);
    let expect = HeartbeatRequest::default()
        .with_group_id(s(GROUP).into())
        .with_generation_id(GENERATION)
        .with_member_id(s(MEMBERS[1].id));
    check_request(
        e.finish(),
        Some("kafka-python"),
        0,
        Request::Heartbeat(expect),
    );

    let mut e = Enc::request(12, 4, CID, Some("rdkafka"), true);
    e.str(GROUP);
    e.i32(GENERATION);
    e.str(MEMBERS[0].id);
    e.nstr(MEMBERS[0].instance);
    e.tags();
    let expect = HeartbeatRequest::default()
        .with_group_id(s(GROUP).into())
        .with_generation_id(GENERATION)
        .with_member_id(s(MEMBERS[0].id))
        .with_group_instance_id(MEMBERS[0].instance.map(s));
    check_request(e.finish(), Some("rdkafka"), 4, Request::Heartbeat(expect));
}

#[test]
fn requests_leave_group() {
    use leave_group_request::MemberIdentity;
    let mut e = Enc::request(13, 0, CID, Some("kafka-python"), false);
    e.str(GROUP);
    e.str(MEMBERS[1].id);
    let expect = LeaveGroupRequest::default()
        .with_group_id(s(GROUP).into())
        .with_member_id(s(MEMBERS[1].id));
    check_request(
        e.finish(),
        Some("kafka-python"),
        0,
        Request::LeaveGroup(expect),
    );

    // v5: a batch with per-member reasons; an admin removes a static member by instance id.
    let mut e = Enc::request(13, 5, CID, Some("adminclient-1"), true);
    e.str(GROUP);
    e.arr(2);
    e.str(MEMBERS[0].id);
    e.nstr(MEMBERS[0].instance);
    e.nstr(Some("the consumer is being closed"));
    e.tags();
    e.str("");
    e.nstr(Some("consumer-c-9"));
    e.nstr(None);
    e.tags();
    e.tags();
    let expect = LeaveGroupRequest::default()
        .with_group_id(s(GROUP).into())
        .with_members(vec![
            MemberIdentity::default()
                .with_member_id(s(MEMBERS[0].id))
                .with_group_instance_id(MEMBERS[0].instance.map(s))
                .with_reason(Some(s("the consumer is being closed"))),
            MemberIdentity::default()
                .with_member_id(s(""))
                .with_group_instance_id(Some(s("consumer-c-9")))
                .with_reason(None),
        ]);
    check_request(
        e.finish(),
        Some("adminclient-1"),
        5,
        Request::LeaveGroup(expect),
    );
}

#[test]
fn requests_sync_group() {
    use sync_group_request::SyncGroupRequestAssignment;
    // v0: the leader hands out both assignments.
    let mut e = Enc::request(14, 0, CID, Some("rdkafka"), false);
    e.str(GROUP);
    e.i32(GENERATION);
    e.str(MEMBERS[0].id);
    e.arr(2);
    for m in &MEMBERS {
        e.str(m.id);
        e.bytes(&assignment(m.assigned));
    }
    let expect = SyncGroupRequest::default()
        .with_group_id(s(GROUP).into())
        .with_generation_id(GENERATION)
        .with_member_id(s(MEMBERS[0].id))
        .with_assignments(
            MEMBERS
                .iter()
                .map(|m| {
                    SyncGroupRequestAssignment::default()
                        .with_member_id(s(m.id))
                        .with_assignment(Bytes::from(assignment(m.assigned)))
                })
                .collect(),
        );
    check_request(e.finish(), Some("rdkafka"), 0, Request::SyncGroup(expect));

    // v5: a follower (no assignments) naming the protocol it joined with.
    let mut e = Enc::request(14, 5, CID, Some("consumer-g-classic-2"), true);
    e.str(GROUP);
    e.i32(GENERATION);
    e.str(MEMBERS[1].id);
    e.nstr(None);
    e.nstr(Some(PROTOCOL_TYPE));
    e.nstr(Some(ASSIGNOR));
    e.arr(0);
    e.tags();
    let expect = SyncGroupRequest::default()
        .with_group_id(s(GROUP).into())
        .with_generation_id(GENERATION)
        .with_member_id(s(MEMBERS[1].id))
        .with_group_instance_id(None)
        .with_protocol_type(Some(s(PROTOCOL_TYPE)))
        .with_protocol_name(Some(s(ASSIGNOR)))
        .with_assignments(vec![]);
    check_request(
        e.finish(),
        Some("consumer-g-classic-2"),
        5,
        Request::SyncGroup(expect),
    );
}

#[test]
fn requests_describe_groups() {
    let mut e = Enc::request(15, 0, CID, Some("adminclient-1"), false);
    e.arr(2);
    e.str(GROUP);
    e.str(UNKNOWN_GROUP);
    let expect = DescribeGroupsRequest::default()
        .with_groups(vec![s(GROUP).into(), s(UNKNOWN_GROUP).into()]);
    check_request(
        e.finish(),
        Some("adminclient-1"),
        0,
        Request::DescribeGroups(expect),
    );

    let mut e = Enc::request(15, 6, CID, Some("adminclient-1"), true);
    e.arr(2);
    e.str(GROUP);
    e.str(UNKNOWN_GROUP);
    e.bool(true);
    e.tags();
    let expect = DescribeGroupsRequest::default()
        .with_groups(vec![s(GROUP).into(), s(UNKNOWN_GROUP).into()])
        .with_include_authorized_operations(true);
    check_request(
        e.finish(),
        Some("adminclient-1"),
        6,
        Request::DescribeGroups(expect),
    );
}

#[test]
fn requests_list_groups() {
    // v0: an empty body.
    let e = Enc::request(16, 0, CID, Some("kafka-python"), false);
    check_request(
        e.finish(),
        Some("kafka-python"),
        0,
        Request::ListGroups(ListGroupsRequest::default()),
    );

    let mut e = Enc::request(16, 5, CID, Some("adminclient-1"), true);
    e.arr(2);
    e.str("Stable");
    e.str("Empty");
    e.arr(1);
    e.str("classic");
    e.tags();
    let expect = ListGroupsRequest::default()
        .with_states_filter(vec![s("Stable"), s("Empty")])
        .with_types_filter(vec![s("classic")]);
    check_request(
        e.finish(),
        Some("adminclient-1"),
        5,
        Request::ListGroups(expect),
    );
}

#[test]
fn requests_delete_groups() {
    for v in [0i16, 2] {
        let mut e = Enc::request(42, v, CID, Some("adminclient-1"), v >= 2);
        e.arr(2);
        e.str("g-old");
        e.str(GROUP);
        e.tags();
        let expect = DeleteGroupsRequest::default()
            .with_groups_names(vec![s("g-old").into(), s(GROUP).into()]);
        check_request(
            e.finish(),
            Some("adminclient-1"),
            v,
            Request::DeleteGroups(expect),
        );
    }
}

#[test]
fn requests_offset_delete() {
    use offset_delete_request::*;
    let mut e = Enc::request(47, 0, CID, Some("adminclient-1"), false);
    e.str(GROUP);
    e.arr(2);
    e.str(TOPIC);
    e.arr(2);
    e.i32(0);
    e.i32(1);
    e.str(AUDIT_TOPIC);
    e.arr(1);
    e.i32(0);
    let expect = OffsetDeleteRequest::default()
        .with_group_id(s(GROUP).into())
        .with_topics(vec![
            OffsetDeleteRequestTopic::default()
                .with_name(s(TOPIC).into())
                .with_partitions(vec![
                    OffsetDeleteRequestPartition::default().with_partition_index(0),
                    OffsetDeleteRequestPartition::default().with_partition_index(1),
                ]),
            OffsetDeleteRequestTopic::default()
                .with_name(s(AUDIT_TOPIC).into())
                .with_partitions(vec![
                    OffsetDeleteRequestPartition::default().with_partition_index(0)
                ]),
        ]);
    check_request(
        e.finish(),
        Some("adminclient-1"),
        0,
        Request::OffsetDelete(expect),
    );
}

/// One ConsumerGroupHeartbeat request body as a client writes it (v0 has no regex field).
struct CgHeartbeat<'a> {
    member_id: &'a str,
    epoch: i32,
    instance: Option<&'a str>,
    rack: Option<&'a str>,
    rebalance_timeout: i32,
    names: Option<&'a [&'a str]>,
    regex: Option<&'a str>,
    assignor: Option<&'a str>,
    owned: Option<&'a [([u8; 16], &'a [i32])]>,
}

impl CgHeartbeat<'_> {
    fn frame(&self, v: i16, client_id: &str) -> Bytes {
        let mut e = Enc::request(68, v, CID, Some(client_id), true);
        e.str(CONSUMER_GROUP);
        e.str(self.member_id);
        e.i32(self.epoch);
        e.nstr(self.instance);
        e.nstr(self.rack);
        e.i32(self.rebalance_timeout);
        e.narr(self.names.map(<[_]>::len));
        for n in self.names.unwrap_or_default() {
            e.str(n);
        }
        if v >= 1 {
            e.nstr(self.regex);
        }
        e.nstr(self.assignor);
        e.narr(self.owned.map(<[_]>::len));
        for &(id, ps) in self.owned.unwrap_or_default() {
            e.uuid(id);
            e.arr(ps.len());
            for &p in ps {
                e.i32(p);
            }
            e.tags();
        }
        e.tags();
        e.finish()
    }

    fn expect(&self) -> ConsumerGroupHeartbeatRequest {
        use consumer_group_heartbeat_request::TopicPartitions;
        ConsumerGroupHeartbeatRequest::default()
            .with_group_id(s(CONSUMER_GROUP).into())
            .with_member_id(s(self.member_id))
            .with_member_epoch(self.epoch)
            .with_instance_id(self.instance.map(s))
            .with_rack_id(self.rack.map(s))
            .with_rebalance_timeout_ms(self.rebalance_timeout)
            .with_subscribed_topic_names(
                self.names
                    .map(|ns| ns.iter().map(|n| s(n).into()).collect()),
            )
            .with_subscribed_topic_regex(self.regex.map(s))
            .with_server_assignor(self.assignor.map(s))
            .with_topic_partitions(self.owned.map(|o| {
                o.iter()
                    .map(|&(id, ps)| {
                        TopicPartitions::default()
                            .with_topic_id(uuid(id))
                            .with_partitions(ps.to_vec())
                    })
                    .collect()
            }))
    }

    fn check(&self, v: i16, client_id: &str) {
        check_request(
            self.frame(v, client_id),
            Some(client_id),
            v,
            Request::ConsumerGroupHeartbeat(self.expect()),
        );
    }
}

#[test]
fn requests_consumer_group_heartbeat() {
    // v0 (Java 4.0): a joining member with an empty id (the coordinator makes one), a static
    // instance id, a rack, a named server assignor and no owned partitions.
    CgHeartbeat {
        member_id: "",
        epoch: 0,
        instance: Some("consumer-b-1"),
        rack: Some(RACK),
        rebalance_timeout: CG_REBALANCE_TIMEOUT,
        names: Some(&[TOPIC, AUDIT_TOPIC]),
        regex: None,
        assignor: Some(CG_ASSIGNOR),
        owned: Some(&[]),
    }
    .check(0, "consumer-g-consumer-2");

    // v1, librdkafka 2.16 (reference §9): its own 22-char member id, epoch 0, subscribed names,
    // regex "" (not null), server assignor null, owned partitions [].
    let join = CgHeartbeat {
        member_id: CG_MEMBER_A,
        epoch: 0,
        instance: None,
        rack: None,
        rebalance_timeout: CG_REBALANCE_TIMEOUT,
        names: Some(&[TOPIC]),
        regex: Some(""),
        assignor: None,
        owned: Some(&[]),
    };
    join.check(1, "rdkafka");
    // The same join with a null regex (@platformatic/kafka).
    CgHeartbeat {
        member_id: CG_MEMBER_B,
        regex: None,
        ..join
    }
    .check(1, "platformatic-kafka");
    // A regex subscription (librdkafka: a topic string starting with '^').
    CgHeartbeat {
        names: Some(&[]),
        regex: Some("^orders-.*"),
        ..join
    }
    .check(1, "rdkafka");
    // A later heartbeat: everything unchanged is null / -1.
    CgHeartbeat {
        epoch: 1,
        rebalance_timeout: -1,
        names: None,
        regex: None,
        owned: None,
        ..join
    }
    .check(1, "rdkafka");
    // Acknowledging a revocation: the partitions it still owns, explicitly.
    CgHeartbeat {
        epoch: 2,
        rebalance_timeout: -1,
        names: None,
        regex: None,
        owned: Some(&[(TOPIC_ID, &[0, 1, 2])]),
        ..join
    }
    .check(1, "rdkafka");
    // Leaving: epoch -1.
    CgHeartbeat {
        epoch: -1,
        rebalance_timeout: -1,
        names: None,
        regex: None,
        owned: None,
        ..join
    }
    .check(1, "rdkafka");
}

#[test]
fn requests_consumer_group_describe() {
    for (v, include_ops) in [(0i16, false), (1, true)] {
        let mut e = Enc::request(69, v, CID, Some("adminclient-1"), true);
        e.arr(2);
        e.str(CONSUMER_GROUP);
        e.str(GROUP);
        e.bool(include_ops);
        e.tags();
        let expect = ConsumerGroupDescribeRequest::default()
            .with_group_ids(vec![s(CONSUMER_GROUP).into(), s(GROUP).into()])
            .with_include_authorized_operations(include_ops);
        check_request(
            e.finish(),
            Some("adminclient-1"),
            v,
            Request::ConsumerGroupDescribe(expect),
        );
    }
}

// ---------------------------------------------------------------------------------------------
// Data-path requests. Produce carries record batches (opaque bytes to the codec); they are
// written here by hand as a producer writes them, and checked with the crate's batch decoder so
// the golden requests carry valid batches.

/// CRC-32C (Castagnoli, reflected polynomial 0x82f63b78), bitwise: the record batch checksum.
fn crc32c(data: &[u8]) -> u32 {
    let mut crc = !0u32;
    for &b in data {
        crc ^= u32::from(b);
        for _ in 0..8 {
            crc = if crc & 1 != 0 {
                (crc >> 1) ^ 0x82f6_3b78
            } else {
                crc >> 1
            };
        }
    }
    !crc
}

/// A zig-zag varint / varlong (record fields).
fn put_varlong(out: &mut Vec<u8>, x: i64) {
    let mut z = ((x << 1) ^ (x >> 63)) as u64;
    while z >= 0x80 {
        out.push((z as u8) | 0x80);
        z >>= 7;
    }
    out.push(z as u8);
}

/// One record of a batch: timestamp delta, key, value, headers.
struct Rec {
    ts_delta: i64,
    key: Option<&'static [u8]>,
    value: &'static [u8],
    headers: &'static [(&'static str, &'static [u8])],
}

/// An uncompressed record batch v2 (magic 2) as a producer writes it: base offset 0, partition
/// leader epoch -1, CreateTime; `producer` is (id, epoch, base sequence), all -1 for a plain
/// producer.
fn record_batch(
    producer: (i64, i16, i32),
    transactional: bool,
    base_ts: i64,
    recs: &[Rec],
) -> Vec<u8> {
    let mut records = Vec::new();
    for (i, r) in recs.iter().enumerate() {
        let mut body = vec![0u8]; // attributes
        put_varlong(&mut body, r.ts_delta);
        put_varlong(&mut body, i as i64); // offset delta
        match r.key {
            Some(k) => {
                put_varlong(&mut body, k.len() as i64);
                body.extend_from_slice(k);
            }
            None => put_varlong(&mut body, -1),
        }
        put_varlong(&mut body, r.value.len() as i64);
        body.extend_from_slice(r.value);
        put_varlong(&mut body, r.headers.len() as i64);
        for (hk, hv) in r.headers {
            put_varlong(&mut body, hk.len() as i64);
            body.extend_from_slice(hk.as_bytes());
            put_varlong(&mut body, hv.len() as i64);
            body.extend_from_slice(hv);
        }
        put_varlong(&mut records, body.len() as i64);
        records.extend_from_slice(&body);
    }
    // What the CRC covers: attributes to the end.
    let (id, epoch, seq) = producer;
    let mut tail = Vec::new();
    tail.extend_from_slice(&(if transactional { 0x10i16 } else { 0 }).to_be_bytes());
    tail.extend_from_slice(&(recs.len() as i32 - 1).to_be_bytes()); // last offset delta
    tail.extend_from_slice(&base_ts.to_be_bytes());
    let max_ts = base_ts + recs.iter().map(|r| r.ts_delta).max().unwrap_or(0);
    tail.extend_from_slice(&max_ts.to_be_bytes());
    tail.extend_from_slice(&id.to_be_bytes());
    tail.extend_from_slice(&epoch.to_be_bytes());
    tail.extend_from_slice(&seq.to_be_bytes());
    tail.extend_from_slice(&(recs.len() as i32).to_be_bytes());
    tail.extend_from_slice(&records);
    let mut b = Vec::new();
    b.extend_from_slice(&0i64.to_be_bytes()); // base offset
    b.extend_from_slice(&(4 + 1 + 4 + tail.len() as i32).to_be_bytes()); // batch length
    b.extend_from_slice(&(-1i32).to_be_bytes()); // partition leader epoch
    b.push(2); // magic
    b.extend_from_slice(&crc32c(&tail).to_be_bytes());
    b.extend_from_slice(&tail);
    b
}

const BATCH_TS: i64 = 1_700_000_000_000;

/// Two keyed order events, the second with a trace header.
const ORDER_RECORDS: &[Rec] = &[
    Rec {
        ts_delta: 0,
        key: Some(b"order-1001"),
        value: b"{\"id\":1001,\"total\":42.5}",
        headers: &[],
    },
    Rec {
        ts_delta: 3,
        key: Some(b"order-1002"),
        value: b"{\"id\":1002,\"total\":7}",
        headers: &[("traceparent", b"00-4bf92f3577b34da6-00f067aa0ba902b7-01")],
    },
];

/// One keyless audit event.
const AUDIT_RECORDS: &[Rec] = &[Rec {
    ts_delta: 0,
    key: None,
    value: b"user=alice action=login",
    headers: &[],
}];

#[test]
fn record_batches_are_valid() {
    use wire::kafka_protocol::records::RecordBatchDecoder;
    // The batch writer above against the crate's decoder (which checks the CRC).
    let batch = record_batch(
        (PRODUCER_ID, PRODUCER_EPOCH, 7),
        true,
        BATCH_TS,
        ORDER_RECORDS,
    );
    assert_eq!(crc32c(b"123456789"), 0xe306_9283, "CRC-32C check value");
    let set = RecordBatchDecoder::decode(&mut Bytes::from(batch)).expect("valid batch");
    assert_eq!(set.version, 2);
    assert_eq!(set.records.len(), 2);
    for (i, (got, want)) in set.records.iter().zip(ORDER_RECORDS).enumerate() {
        assert_eq!(got.offset, i as i64);
        assert_eq!(got.sequence, 7 + i as i32);
        assert_eq!(got.producer_id, PRODUCER_ID);
        assert_eq!(got.producer_epoch, PRODUCER_EPOCH);
        assert!(got.transactional);
        assert_eq!(got.timestamp, BATCH_TS + want.ts_delta);
        assert_eq!(got.key.as_deref(), want.key);
        assert_eq!(got.value.as_deref(), Some(want.value));
        assert_eq!(got.headers.len(), want.headers.len());
        for (hk, hv) in want.headers {
            let got_hv = got
                .headers
                .iter()
                .find(|(k, _)| k.as_str() == *hk)
                .and_then(|(_, v)| v.as_deref());
            assert_eq!(got_hv, Some(*hv), "header {hk}");
        }
    }
    let plain = record_batch((-1, -1, -1), false, BATCH_TS, AUDIT_RECORDS);
    let set = RecordBatchDecoder::decode(&mut Bytes::from(plain)).expect("valid batch");
    assert_eq!(set.records.len(), 1);
    assert_eq!(set.records[0].key, None);
    assert!(!set.records[0].transactional);
    assert_eq!(set.records[0].producer_id, -1);
}

#[test]
fn requests_produce() {
    use produce_request::*;
    let part = |index: i32, batch: &[u8]| {
        PartitionProduceData::default()
            .with_index(index)
            .with_records(Some(Bytes::copy_from_slice(batch)))
    };
    let idempotent = record_batch((PRODUCER_ID, 0, 0), false, BATCH_TS, ORDER_RECORDS);
    let plain = record_batch((-1, -1, -1), false, BATCH_TS, AUDIT_RECORDS);

    // v3 (oldest served): an idempotent producer, acks=all, one partition.
    let mut e = Enc::request(0, 3, CID, Some("rdkafka"), false);
    e.nstr(None); // transactional_id
    e.i16(-1);
    e.i32(30_000);
    e.arr(1);
    e.str(TOPIC);
    e.arr(1);
    e.i32(0);
    e.bytes(&idempotent);
    let expect = ProduceRequest::default()
        .with_transactional_id(None)
        .with_acks(-1)
        .with_timeout_ms(30_000)
        .with_topic_data(vec![TopicProduceData::default()
            .with_name(s(TOPIC).into())
            .with_partition_data(vec![part(0, &idempotent)])]);
    check_request(e.finish(), Some("rdkafka"), 3, Request::Produce(expect));

    // v8 (kafka-python, the last classic version): acks=1, two topics.
    let mut e = Enc::request(0, 8, CID, Some("kafka-python-producer-1"), false);
    e.nstr(None);
    e.i16(1);
    e.i32(30_000);
    e.arr(2);
    e.str(TOPIC);
    e.arr(1);
    e.i32(1);
    e.bytes(&idempotent);
    e.str(AUDIT_TOPIC);
    e.arr(1);
    e.i32(0);
    e.bytes(&plain);
    let expect = ProduceRequest::default()
        .with_transactional_id(None)
        .with_acks(1)
        .with_timeout_ms(30_000)
        .with_topic_data(vec![
            TopicProduceData::default()
                .with_name(s(TOPIC).into())
                .with_partition_data(vec![part(1, &idempotent)]),
            TopicProduceData::default()
                .with_name(s(AUDIT_TOPIC).into())
                .with_partition_data(vec![part(0, &plain)]),
        ]);
    check_request(
        e.finish(),
        Some("kafka-python-producer-1"),
        8,
        Request::Produce(expect),
    );

    // v10 (librdkafka's highest; flexible, by name): acks=0.
    let mut e = Enc::request(0, 10, CID, Some("rdkafka"), true);
    e.nstr(None);
    e.i16(0);
    e.i32(5_000);
    e.arr(1);
    e.str(AUDIT_TOPIC);
    e.arr(1);
    e.i32(0);
    e.bytes(&plain);
    e.tags();
    e.tags();
    e.tags();
    let expect = ProduceRequest::default()
        .with_transactional_id(None)
        .with_acks(0)
        .with_timeout_ms(5_000)
        .with_topic_data(vec![TopicProduceData::default()
            .with_name(s(AUDIT_TOPIC).into())
            .with_partition_data(vec![part(0, &plain)])]);
    check_request(e.finish(), Some("rdkafka"), 10, Request::Produce(expect));

    // v13 (Java 4.1+, topic ids): a transactional producer writing to two partitions.
    let txn = record_batch(
        (PRODUCER_ID, PRODUCER_EPOCH, 7),
        true,
        BATCH_TS,
        ORDER_RECORDS,
    );
    let client = "producer-tx-orders";
    let mut e = Enc::request(0, 13, CID, Some(client), true);
    e.nstr(Some(TRANSACTIONAL_ID));
    e.i16(-1);
    e.i32(30_000);
    e.arr(1);
    e.uuid(TOPIC_ID);
    e.arr(2);
    for p in 0..2 {
        e.i32(p);
        e.bytes(&txn);
        e.tags();
    }
    e.tags();
    e.tags();
    let expect = ProduceRequest::default()
        .with_transactional_id(Some(s(TRANSACTIONAL_ID).into()))
        .with_acks(-1)
        .with_timeout_ms(30_000)
        .with_topic_data(vec![TopicProduceData::default()
            .with_topic_id(uuid(TOPIC_ID))
            .with_partition_data(vec![part(0, &txn), part(1, &txn)])]);
    check_request(e.finish(), Some(client), 13, Request::Produce(expect));
}

#[test]
fn requests_delete_records() {
    use delete_records_request::*;
    // orders p0 up to offset 17, p1 up to the high watermark (-1); ghost p0 (unknown topic).
    let wanted: [(&str, &[(i32, i64)]); 2] = [(TOPIC, &[(0, 17), (1, -1)]), ("ghost", &[(0, 3)])];
    for v in [0i16, 2] {
        let flex = v >= 2;
        let mut e = Enc::request(21, v, CID, Some("adminclient-1"), flex);
        e.arr(wanted.len());
        for (name, parts) in wanted {
            e.str(name);
            e.arr(parts.len());
            for &(p, offset) in parts {
                e.i32(p);
                e.i64(offset);
                e.tags();
            }
            e.tags();
        }
        e.i32(30_000);
        e.tags();
        let expect = DeleteRecordsRequest::default()
            .with_topics(
                wanted
                    .iter()
                    .map(|&(name, parts)| {
                        DeleteRecordsTopic::default()
                            .with_name(s(name).into())
                            .with_partitions(
                                parts
                                    .iter()
                                    .map(|&(p, offset)| {
                                        DeleteRecordsPartition::default()
                                            .with_partition_index(p)
                                            .with_offset(offset)
                                    })
                                    .collect(),
                            )
                    })
                    .collect(),
            )
            .with_timeout_ms(30_000);
        check_request(
            e.finish(),
            Some("adminclient-1"),
            v,
            Request::DeleteRecords(expect),
        );
    }
}

#[test]
fn requests_init_producer_id() {
    // v0: a transactional producer's first InitProducerId.
    let mut e = Enc::request(22, 0, CID, Some("producer-tx-orders"), false);
    e.nstr(Some(TRANSACTIONAL_ID));
    e.i32(60_000);
    let expect = InitProducerIdRequest::default()
        .with_transactional_id(Some(s(TRANSACTIONAL_ID).into()))
        .with_transaction_timeout_ms(60_000);
    check_request(
        e.finish(),
        Some("producer-tx-orders"),
        0,
        Request::InitProducerId(expect),
    );

    // v2 (first flexible): an idempotent, non-transactional producer (null id).
    let mut e = Enc::request(22, 2, CID, Some("producer-1"), true);
    e.nstr(None);
    e.i32(i32::MAX);
    e.tags();
    let expect = InitProducerIdRequest::default()
        .with_transactional_id(None)
        .with_transaction_timeout_ms(i32::MAX);
    check_request(
        e.finish(),
        Some("producer-1"),
        2,
        Request::InitProducerId(expect),
    );

    // v5: the transactional producer re-initialising with its current id and epoch (KIP-360).
    let mut e = Enc::request(22, 5, CID, Some("producer-tx-orders"), true);
    e.nstr(Some(TRANSACTIONAL_ID));
    e.i32(60_000);
    e.i64(PRODUCER_ID);
    e.i16(PRODUCER_EPOCH - 1);
    e.tags();
    let expect = InitProducerIdRequest::default()
        .with_transactional_id(Some(s(TRANSACTIONAL_ID).into()))
        .with_transaction_timeout_ms(60_000)
        .with_producer_id(ProducerId(PRODUCER_ID))
        .with_producer_epoch(PRODUCER_EPOCH - 1);
    check_request(
        e.finish(),
        Some("producer-tx-orders"),
        5,
        Request::InitProducerId(expect),
    );
}

#[test]
fn requests_add_partitions_to_txn() {
    use add_partitions_to_txn_request::*;
    let topic = |name: &str, parts: &[i32]| {
        AddPartitionsToTxnTopic::default()
            .with_name(s(name).into())
            .with_partitions(parts.to_vec())
    };
    // v0 and v3 (first flexible): a producer adds two topics to its transaction.
    for v in [0i16, 3] {
        let flex = v >= 3;
        let mut e = Enc::request(24, v, CID, Some("producer-tx-orders"), flex);
        e.str(TRANSACTIONAL_ID);
        e.i64(PRODUCER_ID);
        e.i16(PRODUCER_EPOCH);
        e.arr(2);
        e.str(TOPIC);
        e.arr(2);
        e.i32(0);
        e.i32(1);
        e.tags();
        e.str(AUDIT_TOPIC);
        e.arr(1);
        e.i32(0);
        e.tags();
        e.tags();
        let expect = AddPartitionsToTxnRequest::default()
            .with_v3_and_below_transactional_id(s(TRANSACTIONAL_ID).into())
            .with_v3_and_below_producer_id(ProducerId(PRODUCER_ID))
            .with_v3_and_below_producer_epoch(PRODUCER_EPOCH)
            .with_v3_and_below_topics(vec![topic(TOPIC, &[0, 1]), topic(AUDIT_TOPIC, &[0])]);
        check_request(
            e.finish(),
            Some("producer-tx-orders"),
            v,
            Request::AddPartitionsToTxn(expect),
        );
    }

    // v5: a broker's batched form, one transaction to add to and one to verify only.
    let mut e = Enc::request(24, 5, CID, Some("broker-1"), true);
    e.arr(2);
    e.str(TRANSACTIONAL_ID);
    e.i64(PRODUCER_ID);
    e.i16(PRODUCER_EPOCH);
    e.bool(false);
    e.arr(1);
    e.str(TOPIC);
    e.arr(2);
    e.i32(0);
    e.i32(1);
    e.tags();
    e.tags();
    e.str(AUDIT_TRANSACTIONAL_ID);
    e.i64(AUDIT_PRODUCER_ID);
    e.i16(0);
    e.bool(true);
    e.arr(1);
    e.str(AUDIT_TOPIC);
    e.arr(1);
    e.i32(0);
    e.tags();
    e.tags();
    e.tags();
    let expect = AddPartitionsToTxnRequest::default().with_transactions(vec![
        AddPartitionsToTxnTransaction::default()
            .with_transactional_id(s(TRANSACTIONAL_ID).into())
            .with_producer_id(ProducerId(PRODUCER_ID))
            .with_producer_epoch(PRODUCER_EPOCH)
            .with_verify_only(false)
            .with_topics(vec![topic(TOPIC, &[0, 1])]),
        AddPartitionsToTxnTransaction::default()
            .with_transactional_id(s(AUDIT_TRANSACTIONAL_ID).into())
            .with_producer_id(ProducerId(AUDIT_PRODUCER_ID))
            .with_producer_epoch(0)
            .with_verify_only(true)
            .with_topics(vec![topic(AUDIT_TOPIC, &[0])]),
    ]);
    check_request(
        e.finish(),
        Some("broker-1"),
        5,
        Request::AddPartitionsToTxn(expect),
    );
}

#[test]
fn requests_add_offsets_to_txn() {
    for v in [0i16, 4] {
        let mut e = Enc::request(25, v, CID, Some("producer-tx-orders"), v >= 3);
        e.str(TRANSACTIONAL_ID);
        e.i64(PRODUCER_ID);
        e.i16(PRODUCER_EPOCH);
        e.str(GROUP);
        e.tags();
        let expect = AddOffsetsToTxnRequest::default()
            .with_transactional_id(s(TRANSACTIONAL_ID).into())
            .with_producer_id(ProducerId(PRODUCER_ID))
            .with_producer_epoch(PRODUCER_EPOCH)
            .with_group_id(s(GROUP).into());
        check_request(
            e.finish(),
            Some("producer-tx-orders"),
            v,
            Request::AddOffsetsToTxn(expect),
        );
    }
}

#[test]
fn requests_end_txn() {
    // v0 aborts, v5 commits.
    for (v, committed) in [(0i16, false), (5, true)] {
        let mut e = Enc::request(26, v, CID, Some("producer-tx-orders"), v >= 3);
        e.str(TRANSACTIONAL_ID);
        e.i64(PRODUCER_ID);
        e.i16(PRODUCER_EPOCH);
        e.bool(committed);
        e.tags();
        let expect = EndTxnRequest::default()
            .with_transactional_id(s(TRANSACTIONAL_ID).into())
            .with_producer_id(ProducerId(PRODUCER_ID))
            .with_producer_epoch(PRODUCER_EPOCH)
            .with_committed(committed);
        check_request(
            e.finish(),
            Some("producer-tx-orders"),
            v,
            Request::EndTxn(expect),
        );
    }
}

#[test]
fn requests_txn_offset_commit() {
    use txn_offset_commit_request::*;
    // v0: no group identity, no leader epoch; metadata "" and null.
    let mut e = Enc::request(28, 0, CID, Some("producer-tx-orders"), false);
    e.str(TRANSACTIONAL_ID);
    e.str(GROUP);
    e.i64(PRODUCER_ID);
    e.i16(PRODUCER_EPOCH);
    e.arr(1);
    e.str(TOPIC);
    e.arr(2);
    e.i32(0);
    e.i64(HIGH_WATERMARK);
    e.nstr(Some(""));
    e.i32(1);
    e.i64(17);
    e.nstr(None);
    let expect = TxnOffsetCommitRequest::default()
        .with_transactional_id(s(TRANSACTIONAL_ID).into())
        .with_group_id(s(GROUP).into())
        .with_producer_id(ProducerId(PRODUCER_ID))
        .with_producer_epoch(PRODUCER_EPOCH)
        .with_topics(vec![TxnOffsetCommitRequestTopic::default()
            .with_name(s(TOPIC).into())
            .with_partitions(vec![
                TxnOffsetCommitRequestPartition::default()
                    .with_partition_index(0)
                    .with_committed_offset(HIGH_WATERMARK)
                    .with_committed_metadata(Some(s(""))),
                TxnOffsetCommitRequestPartition::default()
                    .with_partition_index(1)
                    .with_committed_offset(17)
                    .with_committed_metadata(None),
            ])]);
    check_request(
        e.finish(),
        Some("producer-tx-orders"),
        0,
        Request::TxnOffsetCommit(expect),
    );

    // v5 (flexible): the consumer's group generation, member and instance id, leader epochs.
    let mut e = Enc::request(28, 5, CID, Some("producer-tx-orders"), true);
    e.str(TRANSACTIONAL_ID);
    e.str(GROUP);
    e.i64(PRODUCER_ID);
    e.i16(PRODUCER_EPOCH);
    e.i32(GENERATION);
    e.str(MEMBERS[0].id);
    e.nstr(MEMBERS[0].instance);
    e.arr(2);
    e.str(TOPIC);
    e.arr(1);
    e.i32(0);
    e.i64(HIGH_WATERMARK);
    e.i32(LEADER_EPOCH);
    e.nstr(Some(""));
    e.tags();
    e.tags();
    e.str(AUDIT_TOPIC);
    e.arr(1);
    e.i32(0);
    e.i64(5);
    e.i32(-1);
    e.nstr(Some("checkpoint-5"));
    e.tags();
    e.tags();
    e.tags();
    let expect = TxnOffsetCommitRequest::default()
        .with_transactional_id(s(TRANSACTIONAL_ID).into())
        .with_group_id(s(GROUP).into())
        .with_producer_id(ProducerId(PRODUCER_ID))
        .with_producer_epoch(PRODUCER_EPOCH)
        .with_generation_id(GENERATION)
        .with_member_id(s(MEMBERS[0].id))
        .with_group_instance_id(MEMBERS[0].instance.map(s))
        .with_topics(vec![
            TxnOffsetCommitRequestTopic::default()
                .with_name(s(TOPIC).into())
                .with_partitions(vec![TxnOffsetCommitRequestPartition::default()
                    .with_partition_index(0)
                    .with_committed_offset(HIGH_WATERMARK)
                    .with_committed_leader_epoch(LEADER_EPOCH)
                    .with_committed_metadata(Some(s("")))]),
            TxnOffsetCommitRequestTopic::default()
                .with_name(s(AUDIT_TOPIC).into())
                .with_partitions(vec![TxnOffsetCommitRequestPartition::default()
                    .with_partition_index(0)
                    .with_committed_offset(5)
                    .with_committed_leader_epoch(-1)
                    .with_committed_metadata(Some(s("checkpoint-5")))]),
        ]);
    check_request(
        e.finish(),
        Some("producer-tx-orders"),
        5,
        Request::TxnOffsetCommit(expect),
    );
}

#[test]
fn requests_describe_transactions() {
    let mut e = Enc::request(65, 0, CID, Some("adminclient-1"), true);
    e.arr(2);
    e.str(TRANSACTIONAL_ID);
    e.str(GHOST_TRANSACTIONAL_ID);
    e.tags();
    let expect = DescribeTransactionsRequest::default().with_transactional_ids(vec![
        s(TRANSACTIONAL_ID).into(),
        s(GHOST_TRANSACTIONAL_ID).into(),
    ]);
    check_request(
        e.finish(),
        Some("adminclient-1"),
        0,
        Request::DescribeTransactions(expect),
    );
}

#[test]
fn requests_update_features() {
    use update_features_request::*;
    // v0: AllowDowngrade (what kafka-features.sh of a 2.x client sends).
    let mut e = Enc::request(57, 0, CID, Some("adminclient-1"), true);
    e.i32(30_000);
    e.arr(1);
    e.str("transaction.version");
    e.i16(1);
    e.bool(true);
    e.tags();
    e.tags();
    let expect = UpdateFeaturesRequest::default()
        .with_timeout_ms(30_000)
        .with_feature_updates(vec![FeatureUpdateKey::default()
            .with_feature(s("transaction.version"))
            .with_max_version_level(1)
            .with_allow_downgrade(true)]);
    check_request(
        e.finish(),
        Some("adminclient-1"),
        0,
        Request::UpdateFeatures(expect),
    );

    // v2 (the Java Admin 4.4): UpgradeType SAFE_DOWNGRADE, ValidateOnly.
    let mut e = Enc::request(57, 2, CID, Some("adminclient-1"), true);
    e.i32(30_000);
    e.arr(1);
    e.str("transaction.version");
    e.i16(1);
    e.i8(2);
    e.tags();
    e.bool(true);
    e.tags();
    let expect = UpdateFeaturesRequest::default()
        .with_timeout_ms(30_000)
        .with_feature_updates(vec![FeatureUpdateKey::default()
            .with_feature(s("transaction.version"))
            .with_max_version_level(1)
            .with_upgrade_type(2)])
        .with_validate_only(true);
    check_request(
        e.finish(),
        Some("adminclient-1"),
        2,
        Request::UpdateFeatures(expect),
    );
}

#[test]
fn requests_list_transactions() {
    // v0: filter by state and producer id.
    let mut e = Enc::request(66, 0, CID, Some("adminclient-1"), true);
    e.arr(2);
    e.str("Ongoing");
    e.str(UNKNOWN_TXN_STATE);
    e.arr(1);
    e.i64(PRODUCER_ID);
    e.tags();
    let expect = ListTransactionsRequest::default()
        .with_state_filters(vec![s("Ongoing"), s(UNKNOWN_TXN_STATE)])
        .with_producer_id_filters(vec![ProducerId(PRODUCER_ID)]);
    check_request(
        e.finish(),
        Some("adminclient-1"),
        0,
        Request::ListTransactions(expect),
    );

    // v1: transactions running for more than a minute (KIP-994).
    let mut e = Enc::request(66, 1, CID, Some("adminclient-1"), true);
    e.arr(0);
    e.arr(0);
    e.i64(60_000);
    e.tags();
    let expect = ListTransactionsRequest::default().with_duration_filter(60_000);
    check_request(
        e.finish(),
        Some("adminclient-1"),
        1,
        Request::ListTransactions(expect),
    );

    // v2: ids matching a pattern (KIP-1152), no duration filter; then a null pattern.
    for pattern in [Some("tx-.*"), None] {
        let mut e = Enc::request(66, 2, CID, Some("adminclient-1"), true);
        e.arr(1);
        e.str("Ongoing");
        e.arr(0);
        e.i64(-1);
        e.nstr(pattern);
        e.tags();
        let expect = ListTransactionsRequest::default()
            .with_state_filters(vec![s("Ongoing")])
            .with_duration_filter(-1)
            .with_transactional_id_pattern(pattern.map(s));
        check_request(
            e.finish(),
            Some("adminclient-1"),
            2,
            Request::ListTransactions(expect),
        );
    }
}

#[test]
fn requests_describe_producers() {
    // What `Admin.describeProducers` sends: partitions grouped by topic.
    let mut e = Enc::request(61, 0, CID, Some("adminclient-1"), true);
    e.arr(2);
    e.str(TOPIC);
    e.arr(2);
    e.i32(0);
    e.i32(1);
    e.tags();
    e.str(AUDIT_TOPIC);
    e.arr(1);
    e.i32(0);
    e.tags();
    e.tags();
    use describe_producers_request::TopicRequest;
    let expect = DescribeProducersRequest::default().with_topics(vec![
        TopicRequest::default()
            .with_name(s(TOPIC).into())
            .with_partition_indexes(vec![0, 1]),
        TopicRequest::default()
            .with_name(s(AUDIT_TOPIC).into())
            .with_partition_indexes(vec![0]),
    ]);
    check_request(
        e.finish(),
        Some("adminclient-1"),
        0,
        Request::DescribeProducers(expect),
    );
}

#[test]
fn requests_describe_user_scram_credentials() {
    use describe_user_scram_credentials_request::UserName;
    // `kafka-configs --describe --entity-type users --entity-name alice`: one user.
    let mut e = Enc::request(50, 0, CID, Some("adminclient-1"), true);
    e.narr(Some(1));
    e.str("alice");
    e.tags();
    e.tags();
    let expect = DescribeUserScramCredentialsRequest::default()
        .with_users(Some(vec![UserName::default().with_name(s("alice"))]));
    check_request(
        e.finish(),
        Some("adminclient-1"),
        0,
        Request::DescribeUserScramCredentials(expect),
    );
    // Every user: a null array (what `Admin.describeUserScramCredentials()` sends).
    let mut e = Enc::request(50, 0, CID, Some("adminclient-1"), true);
    e.narr(None);
    e.tags();
    let expect = DescribeUserScramCredentialsRequest::default().with_users(None);
    check_request(
        e.finish(),
        Some("adminclient-1"),
        0,
        Request::DescribeUserScramCredentials(expect),
    );
}

#[test]
fn requests_describe_client_quotas() {
    use describe_client_quotas_request::ComponentData;
    // `kafka-configs --describe --entity-type users --entity-name alice` (v1, flexible):
    // the user alice exactly (match type 0), not strict.
    let mut e = Enc::request(48, 1, CID, Some("adminclient-1"), true);
    e.arr(1);
    e.str("user");
    e.i8(0);
    e.nstr(Some("alice"));
    e.tags();
    e.bool(false);
    e.tags();
    let expect = DescribeClientQuotasRequest::default()
        .with_components(vec![ComponentData::default()
            .with_entity_type(s("user"))
            .with_match_type(0)
            .with_match(Some(s("alice")))])
        .with_strict(false);
    check_request(
        e.finish(),
        Some("adminclient-1"),
        1,
        Request::DescribeClientQuotas(expect),
    );
    // v0 (classic encoding): every user (match type 2, null match), strict.
    let mut e = Enc::request(48, 0, CID, Some("adminclient-1"), false);
    e.arr(1);
    e.str("user");
    e.i8(2);
    e.nstr(None);
    e.bool(true);
    let expect = DescribeClientQuotasRequest::default()
        .with_components(vec![ComponentData::default()
            .with_entity_type(s("user"))
            .with_match_type(2)
            .with_match(None)])
        .with_strict(true);
    check_request(
        e.finish(),
        Some("adminclient-1"),
        0,
        Request::DescribeClientQuotas(expect),
    );
}

#[test]
fn requests_alter_user_scram_credentials() {
    use alter_user_scram_credentials_request::*;
    // One deletion (bob, SHA-512) and one upsertion (alice, SHA-256, 8192 iterations).
    let mut e = Enc::request(51, 0, CID, Some("adminclient-1"), true);
    e.arr(1);
    e.str("bob");
    e.i8(2);
    e.tags();
    e.arr(1);
    e.str("alice");
    e.i8(1);
    e.i32(8192);
    e.bytes(b"salt");
    e.bytes(&[7u8; 32]);
    e.tags();
    e.tags();
    let expect = AlterUserScramCredentialsRequest::default()
        .with_deletions(vec![ScramCredentialDeletion::default()
            .with_name(s("bob"))
            .with_mechanism(2)])
        .with_upsertions(vec![ScramCredentialUpsertion::default()
            .with_name(s("alice"))
            .with_mechanism(1)
            .with_iterations(8192)
            .with_salt(bytes::Bytes::from_static(b"salt"))
            .with_salted_password(bytes::Bytes::from(vec![7u8; 32]))]);
    check_request(
        e.finish(),
        Some("adminclient-1"),
        0,
        Request::AlterUserScramCredentials(expect),
    );
}

#[test]
fn requests_sasl_handshake_and_authenticate() {
    // SaslHandshake v1 (every current client), not flexible.
    for v in 0..=1 {
        let mut e = Enc::request(17, v, CID, Some("producer-1"), false);
        e.str("SCRAM-SHA-512");
        let expect = SaslHandshakeRequest::default().with_mechanism(s("SCRAM-SHA-512"));
        check_request(
            e.finish(),
            Some("producer-1"),
            v,
            Request::SaslHandshake(expect),
        );
    }
    // SaslAuthenticate: a SCRAM client-first message; v2 is flexible.
    let token = b"n,,n=alice,r=fyko+d2lbbFgONRv9qkxdawL";
    for v in 0..=2 {
        let mut e = Enc::request(36, v, CID, Some("producer-1"), v >= 2);
        e.bytes(token);
        e.tags();
        let expect = SaslAuthenticateRequest::default().with_auth_bytes(Bytes::from_static(token));
        check_request(
            e.finish(),
            Some("producer-1"),
            v,
            Request::SaslAuthenticate(expect),
        );
    }
}

#[test]
fn requests_acls() {
    // What `kafka-acls --list --topic orders --resource-pattern-type match` sends (DescribeAcls),
    // `--add --allow-principal User:alice --operation Read --topic orders
    // --resource-pattern-type prefixed` (CreateAcls) and the matching `--remove` (DeleteAcls).
    for v in 1..=3i16 {
        let flex = v >= 2;
        let tags = |e: &mut Enc| {
            if flex {
                e.tags()
            }
        };
        let mut e = Enc::request(29, v, CID, Some("adminclient-1"), flex);
        e.i8(2);
        e.nstr(Some("orders"));
        e.i8(2);
        e.nstr(None);
        e.nstr(None);
        e.i8(1);
        e.i8(1);
        tags(&mut e);
        let expect = DescribeAclsRequest::default()
            .with_resource_type_filter(2)
            .with_resource_name_filter(Some(s("orders")))
            .with_pattern_type_filter(2)
            .with_principal_filter(None)
            .with_host_filter(None)
            .with_operation(1)
            .with_permission_type(1);
        check_request(
            e.finish(),
            Some("adminclient-1"),
            v,
            Request::DescribeAcls(expect),
        );

        let mut e = Enc::request(30, v, CID, Some("adminclient-1"), flex);
        e.arr(1);
        e.i8(2);
        e.str("orders");
        e.i8(4);
        e.str(ACL_PRINCIPAL);
        e.str("*");
        e.i8(3);
        e.i8(3);
        tags(&mut e);
        tags(&mut e);
        let expect = CreateAclsRequest::default().with_creations(vec![
            create_acls_request::AclCreation::default()
                .with_resource_type(2)
                .with_resource_name(s("orders"))
                .with_resource_pattern_type(4)
                .with_principal(s(ACL_PRINCIPAL))
                .with_host(s("*"))
                .with_operation(3)
                .with_permission_type(3),
        ]);
        check_request(
            e.finish(),
            Some("adminclient-1"),
            v,
            Request::CreateAcls(expect),
        );

        let mut e = Enc::request(31, v, CID, Some("adminclient-1"), flex);
        e.arr(1);
        e.i8(2);
        e.nstr(Some("orders"));
        e.i8(4);
        e.nstr(Some(ACL_PRINCIPAL));
        e.nstr(Some("*"));
        e.i8(3);
        e.i8(3);
        tags(&mut e);
        tags(&mut e);
        let expect = DeleteAclsRequest::default().with_filters(vec![
            delete_acls_request::DeleteAclsFilter::default()
                .with_resource_type_filter(2)
                .with_resource_name_filter(Some(s("orders")))
                .with_pattern_type_filter(4)
                .with_principal_filter(Some(s(ACL_PRINCIPAL)))
                .with_host_filter(Some(s("*")))
                .with_operation(3)
                .with_permission_type(3),
        ]);
        check_request(
            e.finish(),
            Some("adminclient-1"),
            v,
            Request::DeleteAcls(expect),
        );
    }
}

#[test]
fn requests_describe_quorum() {
    use describe_quorum_request::*;
    // What `kafka-metadata-quorum describe --status` asks (the metadata log's one partition),
    // at every served version: the request is the same in all three (flexible from v0).
    for v in 0..=2i16 {
        let mut e = Enc::request(55, v, CID, Some("adminclient-1"), true);
        e.arr(1);
        e.str(METADATA_TOPIC);
        e.arr(1);
        e.i32(0);
        e.tags();
        e.tags();
        e.tags();
        let expect = DescribeQuorumRequest::default().with_topics(vec![TopicData::default()
            .with_topic_name(TopicName(s(METADATA_TOPIC)))
            .with_partitions(vec![PartitionData::default().with_partition_index(0)])]);
        check_request(
            e.finish(),
            Some("adminclient-1"),
            v,
            Request::DescribeQuorum(expect),
        );
    }
    // No topics at all (the crate's default request): an empty array, not a null one.
    let mut e = Enc::request(55, 2, CID, None, true);
    e.arr(0);
    e.tags();
    check_request(
        e.finish(),
        None,
        2,
        Request::DescribeQuorum(DescribeQuorumRequest::default()),
    );
}

#[test]
fn requests_remove_raft_voter() {
    let dir = QUORUM_VOTERS[2].1;
    // `kafka-metadata-quorum remove-controller --controller-id 3 --controller-directory-id ...`:
    // `Admin.removeRaftVoter` without a cluster id sends a null one.
    let mut e = Enc::request(81, 0, CID, Some("adminclient-1"), true);
    e.nstr(None);
    e.i32(3);
    e.uuid(dir);
    e.tags();
    let expect = RemoveRaftVoterRequest::default()
        .with_cluster_id(None)
        .with_voter_id(3)
        .with_voter_directory_id(uuid(dir));
    check_request(
        e.finish(),
        Some("adminclient-1"),
        0,
        Request::RemoveRaftVoter(expect),
    );
    // With `RemoveRaftVoterOptions.clusterId` set.
    let mut e = Enc::request(81, 0, CID, Some("adminclient-1"), true);
    e.nstr(Some(CLUSTER_ID));
    e.i32(3);
    e.uuid(dir);
    e.tags();
    let expect = RemoveRaftVoterRequest::default()
        .with_cluster_id(Some(s(CLUSTER_ID)))
        .with_voter_id(3)
        .with_voter_directory_id(uuid(dir));
    check_request(
        e.finish(),
        Some("adminclient-1"),
        0,
        Request::RemoveRaftVoter(expect),
    );
}

#[test]
fn requests_add_raft_voter() {
    use add_raft_voter_request::Listener;
    let (id, dir, ..) = QUORUM_OBSERVERS[0];
    // `kafka-metadata-quorum add-controller` on node 4 (the observer catching up):
    // `Admin.addRaftVoter` with the node's directory id and its controller endpoint, the Admin's
    // default api timeout (60 s) and, without `AddRaftVoterOptions.clusterId`, a null cluster id.
    let mut e = Enc::request(80, 0, CID, Some("adminclient-1"), true);
    e.nstr(None);
    e.i32(60_000);
    e.i32(id);
    e.uuid(dir);
    e.arr(1);
    e.str("CONTROLLER");
    e.str(HOST);
    e.u16(9393);
    e.tags();
    e.tags();
    let listener = || {
        Listener::default()
            .with_name(s("CONTROLLER"))
            .with_host(s(HOST))
            .with_port(9393)
    };
    let expect = AddRaftVoterRequest::default()
        .with_cluster_id(None)
        .with_timeout_ms(60_000)
        .with_voter_id(id)
        .with_voter_directory_id(uuid(dir))
        .with_listeners(vec![listener()]);
    check_request(
        e.finish(),
        Some("adminclient-1"),
        0,
        Request::AddRaftVoter(expect),
    );
    // With `AddRaftVoterOptions.clusterId` set and two listeners (a port above i16::MAX too,
    // which a signed read would get wrong).
    let mut e = Enc::request(80, 0, CID, Some("adminclient-1"), true);
    e.nstr(Some(CLUSTER_ID));
    e.i32(30_000);
    e.i32(id);
    e.uuid(dir);
    e.arr(2);
    e.str("CONTROLLER");
    e.str(HOST);
    e.u16(9393);
    e.tags();
    e.str("CONTROLLER_TLS");
    e.str(HOST2);
    e.u16(49_393);
    e.tags();
    e.tags();
    let expect = AddRaftVoterRequest::default()
        .with_cluster_id(Some(s(CLUSTER_ID)))
        .with_timeout_ms(30_000)
        .with_voter_id(id)
        .with_voter_directory_id(uuid(dir))
        .with_listeners(vec![
            listener(),
            Listener::default()
                .with_name(s("CONTROLLER_TLS"))
                .with_host(s(HOST2))
                .with_port(49_393),
        ]);
    check_request(
        e.finish(),
        Some("adminclient-1"),
        0,
        Request::AddRaftVoter(expect),
    );
}

#[test]
fn requests_elect_leaders() {
    use elect_leaders_request::TopicPartitions;
    // ElectLeadersRequest.json: validVersions 0-2, flexible 2+ (request header v2 from v2).
    // ElectionType (int8)[1+], TopicPartitions (nullable 0+)[]{Topic, Partitions []int32},
    // TimeoutMs.
    // v0 (header v1): "orders" partitions 0 and 1, a 60 s timeout.
    let mut e = Enc::request(43, 0, CID, Some("adminclient-1"), false);
    e.arr(1);
    e.str(TOPIC);
    e.arr(2);
    e.i32(0);
    e.i32(1);
    e.i32(60_000);
    let expect = ElectLeadersRequest::default()
        .with_topic_partitions(Some(vec![TopicPartitions::default()
            .with_topic(TopicName(s(TOPIC)))
            .with_partitions(vec![0, 1])]))
        .with_timeout_ms(60_000);
    check_request(
        e.finish(),
        Some("adminclient-1"),
        0,
        Request::ElectLeaders(expect),
    );

    // v1: an unclean election (type 1) of every partition (null TopicPartitions).
    let mut e = Enc::request(43, 1, CID, Some("adminclient-1"), false);
    e.i8(1);
    e.narr(None);
    e.i32(60_000);
    let expect = ElectLeadersRequest::default()
        .with_election_type(1)
        .with_topic_partitions(None)
        .with_timeout_ms(60_000);
    check_request(
        e.finish(),
        Some("adminclient-1"),
        1,
        Request::ElectLeaders(expect),
    );

    // v2 (flexible, header v2): what `kafka-leader-election --election-type preferred --topic
    // orders --partition 2` sends through the Java Admin: a preferred election of one partition,
    // a 30 s timeout.
    let mut e = Enc::request(43, 2, CID, Some("adminclient-1"), true);
    e.i8(0);
    e.arr(1);
    e.str(TOPIC);
    e.arr(1);
    e.i32(2);
    e.tags();
    e.i32(30_000);
    e.tags();
    let expect = ElectLeadersRequest::default()
        .with_election_type(0)
        .with_topic_partitions(Some(vec![TopicPartitions::default()
            .with_topic(TopicName(s(TOPIC)))
            .with_partitions(vec![2])]))
        .with_timeout_ms(30_000);
    check_request(
        e.finish(),
        Some("adminclient-1"),
        2,
        Request::ElectLeaders(expect),
    );
}

#[test]
fn requests_describe_log_dirs() {
    use describe_log_dirs_request::DescribableLogDirTopic;
    // DescribeLogDirsRequest.json: validVersions 1-4 (0 removed in 4.0), flexible 2+ (request
    // header v2 from v2). Topics (nullable 0+)[]{Topic, Partitions []int32}; v3 and v4 change
    // only the response.
    let topic = |name: &str, parts: &[i32]| {
        DescribableLogDirTopic::default()
            .with_topic(TopicName(s(name)))
            .with_partitions(parts.to_vec())
    };
    // v1 (header v1): the Admin's describeReplicaLogDirs for "orders" partitions 0 and 2.
    let mut e = Enc::request(35, 1, CID, Some("adminclient-1"), false);
    e.arr(1);
    e.str(TOPIC);
    e.arr(2);
    e.i32(0);
    e.i32(2);
    let expect = DescribeLogDirsRequest::default().with_topics(Some(vec![topic(TOPIC, &[0, 2])]));
    check_request(
        e.finish(),
        Some("adminclient-1"),
        1,
        Request::DescribeLogDirs(expect),
    );

    // v2 (flexible, header v2): every partition (null Topics).
    let mut e = Enc::request(35, 2, CID, Some("adminclient-1"), true);
    e.narr(None);
    e.tags();
    let expect = DescribeLogDirsRequest::default().with_topics(None);
    check_request(
        e.finish(),
        Some("adminclient-1"),
        2,
        Request::DescribeLogDirs(expect),
    );

    // v3: an empty (not null) topic list, which asks for nothing.
    let mut e = Enc::request(35, 3, CID, Some("adminclient-1"), true);
    e.arr(0);
    e.tags();
    let expect = DescribeLogDirsRequest::default().with_topics(Some(vec![]));
    check_request(
        e.finish(),
        Some("adminclient-1"),
        3,
        Request::DescribeLogDirs(expect),
    );

    // v4: what `kafka-log-dirs --describe` sends through the Java Admin (its describeLogDirs:
    // null Topics, every log); then describeReplicaLogDirs for "orders" 0, 1 and "audit-log" 0.
    let mut e = Enc::request(35, 4, CID, Some("adminclient-1"), true);
    e.narr(None);
    e.tags();
    check_request(
        e.finish(),
        Some("adminclient-1"),
        4,
        Request::DescribeLogDirs(DescribeLogDirsRequest::default().with_topics(None)),
    );
    let mut e = Enc::request(35, 4, CID, Some("adminclient-1"), true);
    e.arr(2);
    e.str(TOPIC);
    e.arr(2);
    e.i32(0);
    e.i32(1);
    e.tags();
    e.str(AUDIT_TOPIC);
    e.arr(1);
    e.i32(0);
    e.tags();
    e.tags();
    let expect = DescribeLogDirsRequest::default()
        .with_topics(Some(vec![topic(TOPIC, &[0, 1]), topic(AUDIT_TOPIC, &[0])]));
    check_request(
        e.finish(),
        Some("adminclient-1"),
        4,
        Request::DescribeLogDirs(expect),
    );
}

/// (topic, [(partition, replicas or null to cancel)]) of an AlterPartitionReassignments request.
type ReassignTopic<'a> = (&'a str, &'a [(i32, Option<&'a [i32]>)]);

/// Hand-built AlterPartitionReassignments request bytes (request header v2: flexible from v0)
/// and the value they must decode to.
fn alter_partition_reassignments_request(
    v: i16,
    timeout_ms: i32,
    allow_rf_change: bool,
    topics: &[ReassignTopic],
) -> (Bytes, Request) {
    use alter_partition_reassignments_request::{ReassignablePartition, ReassignableTopic};
    let mut e = Enc::request(45, v, CID, Some("adminclient-1"), true);
    e.i32(timeout_ms);
    if v >= 1 {
        e.bool(allow_rf_change);
    }
    e.arr(topics.len());
    for &(name, parts) in topics {
        e.str(name);
        e.arr(parts.len());
        for &(p, replicas) in parts {
            e.i32(p);
            e.narr(replicas.map(<[i32]>::len));
            for &b in replicas.unwrap_or_default() {
                e.i32(b);
            }
            e.tags();
        }
        e.tags();
    }
    e.tags();
    let expect = AlterPartitionReassignmentsRequest::default()
        .with_timeout_ms(timeout_ms)
        .with_allow_replication_factor_change(allow_rf_change)
        .with_topics(
            topics
                .iter()
                .map(|&(name, parts)| {
                    ReassignableTopic::default()
                        .with_name(TopicName(s(name)))
                        .with_partitions(
                            parts
                                .iter()
                                .map(|&(p, replicas)| {
                                    ReassignablePartition::default()
                                        .with_partition_index(p)
                                        .with_replicas(
                                            replicas
                                                .map(|r| r.iter().map(|&b| BrokerId(b)).collect()),
                                        )
                                })
                                .collect(),
                        )
                })
                .collect(),
        );
    (e.finish(), Request::AlterPartitionReassignments(expect))
}

#[test]
fn requests_alter_partition_reassignments() {
    // AlterPartitionReassignmentsRequest.json: validVersions 0-1, flexible 0+ (request header v2).
    // TimeoutMs, AllowReplicationFactorChange bool [1+] (default true; v1 is KIP-860),
    // Topics[]{Name, Partitions[]{PartitionIndex, Replicas (nullable 0+) []int32}}: null Replicas
    // cancels the partition's reassignment.
    let cases: &[(i16, i32, bool, &[ReassignTopic])] = &[
        // v0: `kafka-reassign-partitions --execute` through an Admin that predates KIP-860 (the
        // default api timeout, 60 s): "orders" 0 to [1, 2, 3] and 2 to [2, 3], "audit-log" 0 to
        // [3, 1].
        (
            0,
            60_000,
            true,
            &[
                (TOPIC, &[(0, Some(&[1, 2, 3])), (2, Some(&[2, 3]))]),
                (AUDIT_TOPIC, &[(0, Some(&[3, 1]))]),
            ],
        ),
        // v0: `kafka-reassign-partitions --cancel` of the same: null replicas.
        (
            0,
            60_000,
            true,
            &[
                (TOPIC, &[(0, None), (2, None)]),
                (AUDIT_TOPIC, &[(0, None)]),
            ],
        ),
        // v1 with `AlterPartitionReassignmentsOptions.allowReplicationFactorChange(false)`: a
        // move that keeps the factor, so the flag's false byte is on the wire.
        (1, 60_000, false, &[(TOPIC, &[(2, Some(&[2, 3]))])]),
        // v1, the 4.1+ Admin's default (true) with a 30 s timeout: a move and a cancellation in
        // one topic, and an empty replica list (not null: the controller refuses it, the codec
        // must keep it apart from a cancellation).
        (
            1,
            30_000,
            true,
            &[(TOPIC, &[(0, Some(&[1, 2, 3])), (1, None), (2, Some(&[]))])],
        ),
        // v1 with no topics at all.
        (1, 60_000, true, &[]),
    ];
    for &(v, timeout_ms, allow, topics) in cases {
        let (frame, expect) = alter_partition_reassignments_request(v, timeout_ms, allow, topics);
        check_request(frame, Some("adminclient-1"), v, expect);
    }
}

#[test]
fn requests_list_partition_reassignments() {
    use list_partition_reassignments_request::ListPartitionReassignmentsTopics;
    // ListPartitionReassignmentsRequest.json: validVersions 0, flexible 0+ (request header v2).
    // TimeoutMs, Topics (nullable 0+)[]{Name, PartitionIndexes []int32}: null lists every
    // reassignment under way.
    let topic = |name: &str, parts: &[i32]| {
        ListPartitionReassignmentsTopics::default()
            .with_name(TopicName(s(name)))
            .with_partition_indexes(parts.to_vec())
    };
    // `kafka-reassign-partitions --list` (the Admin's `listPartitionReassignments()`): null.
    let mut e = Enc::request(46, 0, CID, Some("adminclient-1"), true);
    e.i32(60_000);
    e.narr(None);
    e.tags();
    let expect = ListPartitionReassignmentsRequest::default()
        .with_timeout_ms(60_000)
        .with_topics(None);
    check_request(
        e.finish(),
        Some("adminclient-1"),
        0,
        Request::ListPartitionReassignments(expect),
    );

    // The Admin's `listPartitionReassignments(partitions)`: "orders" 0 and 2 and "audit-log" 0,
    // with a 30 s timeout.
    let mut e = Enc::request(46, 0, CID, Some("adminclient-1"), true);
    e.i32(30_000);
    e.arr(2);
    e.str(TOPIC);
    e.arr(2);
    e.i32(0);
    e.i32(2);
    e.tags();
    e.str(AUDIT_TOPIC);
    e.arr(1);
    e.i32(0);
    e.tags();
    e.tags();
    let expect = ListPartitionReassignmentsRequest::default()
        .with_timeout_ms(30_000)
        .with_topics(Some(vec![topic(TOPIC, &[0, 2]), topic(AUDIT_TOPIC, &[0])]));
    check_request(
        e.finish(),
        Some("adminclient-1"),
        0,
        Request::ListPartitionReassignments(expect),
    );

    // An empty (not null) topic list, which asks for nothing.
    let mut e = Enc::request(46, 0, CID, Some("adminclient-1"), true);
    e.i32(60_000);
    e.arr(0);
    e.tags();
    let expect = ListPartitionReassignmentsRequest::default()
        .with_timeout_ms(60_000)
        .with_topics(Some(vec![]));
    check_request(
        e.finish(),
        Some("adminclient-1"),
        0,
        Request::ListPartitionReassignments(expect),
    );
}

#[test]
fn request_golden_cases_cover_every_served_api() {
    // The request tests above exist for exactly these keys; a new served key needs its own.
    let covered = [
        0i16, 1, 2, 3, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 24, 25, 26, 28,
        29, 30, 31, 32, 33, 35, 36, 37, 42, 43, 44, 45, 46, 47, 48, 50, 51, 55, 57, 60, 61, 65, 66,
        68, 69, 80, 81,
    ];
    for r in SERVED {
        assert!(
            covered.contains(&r.api_key),
            "api key {} is served but has no hand-built request test",
            r.api_key
        );
        assert!(KNOWN_API_KEYS.contains(&r.api_key));
    }
}
