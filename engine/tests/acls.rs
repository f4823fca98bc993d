//! ACLs against the real `ringleader` binary: CreateAcls / DescribeAcls / DeleteAcls, and their
//! enforcement in the group and data APIs, with `allow.everyone.if.no.acl.found=true`. Every
//! connection is `User:ANONYMOUS` on the PLAINTEXT listener, so the ACLs here name it.

use kafka_protocol::messages::*;
use wire::{Request, Response};

mod common;
use common::*;

const AUTHORIZER: &str =
    "authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer";
const ANON: &str = "User:ANONYMOUS";
const GROUP_AUTHORIZATION_FAILED: i16 = 30;
const TOPIC_AUTHORIZATION_FAILED: i16 = 29;
const SECURITY_DISABLED: i16 = 54;
const INVALID_REQUEST: i16 = 42;
const CLUSTER_AUTHORIZATION_FAILED: i16 = 31;

/// (resource type, name, operation) denied to User:ANONYMOUS, literal, any host.
fn deny(c: &mut Client, rt: i8, name: &str, op: i8) -> i16 {
    acl(c, rt, name, op, 2)
}

fn acl(c: &mut Client, rt: i8, name: &str, op: i8, permission: i8) -> i16 {
    let req = CreateAclsRequest::default().with_creations(vec![
        create_acls_request::AclCreation::default()
            .with_resource_type(rt)
            .with_resource_name(s(name))
            .with_resource_pattern_type(3)
            .with_principal(s(ANON))
            .with_host(s("*"))
            .with_operation(op)
            .with_permission_type(permission),
    ]);
    let Response::CreateAcls(r) = c.call(3, Request::CreateAcls(req)) else {
        panic!()
    };
    r.results[0].error_code
}

fn describe_acls(c: &mut Client, rt: i8) -> DescribeAclsResponse {
    let req = DescribeAclsRequest::default()
        .with_resource_type_filter(rt)
        .with_resource_name_filter(None)
        .with_pattern_type_filter(1)
        .with_principal_filter(None)
        .with_host_filter(None)
        .with_operation(1)
        .with_permission_type(1);
    let Response::DescribeAcls(r) = c.call(3, Request::DescribeAcls(req)) else {
        panic!()
    };
    r
}

fn join(c: &mut Client, group: &str) -> i16 {
    let req = JoinGroupRequest::default()
        .with_group_id(GroupId(s(group)))
        .with_session_timeout_ms(10_000)
        .with_rebalance_timeout_ms(10_000)
        .with_member_id(s(""))
        .with_protocol_type(s("consumer"))
        .with_protocols(vec![join_group_request::JoinGroupRequestProtocol::default(
        )
        .with_name(s("range"))
        .with_metadata(bytes::Bytes::from_static(&[0, 0, 0, 0, 0, 0, 0, 0]))]);
    let Response::JoinGroup(r) = c.call(5, Request::JoinGroup(req)) else {
        panic!()
    };
    r.error_code
}

fn cg_heartbeat(c: &mut Client, group: &str, topic: &str) -> i16 {
    let req = ConsumerGroupHeartbeatRequest::default()
        .with_group_id(GroupId(s(group)))
        .with_member_id(s("m-1234567890123456789012"))
        .with_member_epoch(0)
        .with_rebalance_timeout_ms(10_000)
        .with_subscribed_topic_names(Some(vec![TopicName(s(topic))]))
        .with_topic_partitions(Some(vec![]));
    let Response::ConsumerGroupHeartbeat(r) = c.call(0, Request::ConsumerGroupHeartbeat(req))
    else {
        panic!()
    };
    r.error_code
}

fn commit(c: &mut Client, group: &str, topic: &str) -> i16 {
    use offset_commit_request::*;
    let req = OffsetCommitRequest::default()
        .with_group_id(GroupId(s(group)))
        .with_generation_id_or_member_epoch(-1)
        .with_member_id(s(""))
        .with_topics(vec![OffsetCommitRequestTopic::default()
            .with_name(TopicName(s(topic)))
            .with_partitions(vec![OffsetCommitRequestPartition::default()
                .with_partition_index(0)
                .with_committed_offset(5)
                .with_committed_metadata(Some(s("")))])]);
    let Response::OffsetCommit(r) = c.call(8, Request::OffsetCommit(req)) else {
        panic!()
    };
    r.topics[0].partitions[0].error_code
}

fn fetch(c: &mut Client, topic: &str) -> i16 {
    use fetch_request::*;
    let req = FetchRequest::default()
        .with_replica_id(BrokerId(-1))
        .with_max_wait_ms(0)
        .with_min_bytes(0)
        .with_max_bytes(1 << 20)
        .with_session_epoch(-1)
        .with_topics(vec![FetchTopic::default()
            .with_topic(TopicName(s(topic)))
            .with_partitions(vec![FetchPartition::default()
                .with_partition(0)
                .with_fetch_offset(0)
                .with_current_leader_epoch(-1)
                .with_log_start_offset(-1)
                .with_partition_max_bytes(1 << 20)])]);
    let Response::Fetch(r) = c.call(12, Request::Fetch(req)) else {
        panic!()
    };
    r.responses[0].partitions[0].error_code
}

fn describe_group(c: &mut Client, group: &str) -> describe_groups_response::DescribedGroup {
    let req = DescribeGroupsRequest::default().with_groups(vec![GroupId(s(group))]);
    let Response::DescribeGroups(r) = c.call(5, Request::DescribeGroups(req)) else {
        panic!()
    };
    r.groups.into_iter().next().unwrap()
}

fn list_groups(c: &mut Client) -> Vec<String> {
    let Response::ListGroups(r) = c.call(4, Request::ListGroups(ListGroupsRequest::default()))
    else {
        panic!()
    };
    let mut g: Vec<String> = r.groups.iter().map(|g| g.group_id.to_string()).collect();
    g.sort();
    g
}

#[test]
fn without_an_authorizer_the_acl_apis_answer_security_disabled() {
    let dir = data_dir("acls-off");
    let b = Broker::start(&dir, &[]);
    let mut c = Client::connect(b.addr);
    let r = describe_acls(&mut c, 1);
    assert_eq!(r.error_code, SECURITY_DISABLED);
    assert_eq!(
        r.error_message.as_deref(),
        Some("No Authorizer is configured on the broker")
    );
    assert_eq!(deny(&mut c, 3, "g1", 3), SECURITY_DISABLED);
}

#[test]
fn acls_are_enforced_survive_a_restart_and_super_users_override_them() {
    let dir = data_dir("acls-on");
    let sets = [AUTHORIZER, "allow.everyone.if.no.acl.found=true"];
    let mut b = Broker::start(&dir, &sets);
    let mut c = Client::connect(b.addr);
    create_topic(&mut c, "orders", 1);
    create_topic(&mut c, "secret", 1);

    // Kafka's validation: a CLUSTER resource must be named kafka-cluster.
    assert_eq!(deny(&mut c, 4, "other", 7), INVALID_REQUEST);
    assert_eq!(deny(&mut c, 3, "g1", 3), 0, "deny Read on group g1");
    assert_eq!(deny(&mut c, 2, "secret", 3), 0, "deny Read on topic secret");

    assert_eq!(join(&mut c, "g1"), GROUP_AUTHORIZATION_FAILED);
    assert_eq!(
        cg_heartbeat(&mut c, "g1", "orders"),
        GROUP_AUTHORIZATION_FAILED
    );
    assert_eq!(commit(&mut c, "g1", "orders"), GROUP_AUTHORIZATION_FAILED);
    // An ACL now names g1, so allow.everyone.if.no.acl.found no longer applies to it: Describe
    // needs an ALLOW (a Read DENY does not deny Describe, but nothing allows it either).
    assert_eq!(
        describe_group(&mut c, "g1").error_code,
        GROUP_AUTHORIZATION_FAILED
    );
    assert_eq!(acl(&mut c, 3, "g1", 8, 3), 0, "allow Describe on group g1");
    let g1 = describe_group(&mut c, "g1");
    assert_eq!(g1.error_code, 0);
    assert_eq!(
        g1.group_state.as_str(),
        "Dead",
        "the refused requests left no group behind"
    );
    assert!(g1.members.is_empty());

    // g2 has no ACL: allowed everything; the topic Read deny still applies to it.
    assert_eq!(commit(&mut c, "g2", "orders"), 0);
    assert_eq!(commit(&mut c, "g2", "secret"), TOPIC_AUTHORIZATION_FAILED);
    assert_eq!(fetch(&mut c, "secret"), TOPIC_AUTHORIZATION_FAILED);
    assert_eq!(fetch(&mut c, "orders"), 0);
    // Describe on a subscribed topic no ACL allows (only a Read DENY names it).
    assert_eq!(
        cg_heartbeat(&mut c, "g3", "secret"),
        TOPIC_AUTHORIZATION_FAILED
    );
    assert_eq!(describe_group(&mut c, "g3").group_state.as_str(), "Dead");

    // Describe on the cluster lists every group (no ACL names the cluster yet).
    assert_eq!(commit(&mut c, "g4", "orders"), 0);
    assert_eq!(deny(&mut c, 3, "g4", 8), 0, "deny Describe on group g4");
    assert_eq!(
        list_groups(&mut c),
        vec!["g2".to_string(), "g4".to_string()]
    );
    assert_eq!(
        describe_group(&mut c, "g4").error_code,
        GROUP_AUTHORIZATION_FAILED
    );
    // Without Describe on the cluster, only the groups the caller may Describe. Alter on the
    // cluster is allowed so the ACLs stay manageable; DescribeAcls needs Describe there.
    assert_eq!(acl(&mut c, 4, "kafka-cluster", 7, 3), 0, "allow Alter");
    assert_eq!(deny(&mut c, 4, "kafka-cluster", 8), 0, "deny Describe");
    assert_eq!(list_groups(&mut c), vec!["g2".to_string()], "g4 is hidden");
    let refused = describe_acls(&mut c, 1);
    assert_eq!(refused.error_code, CLUSTER_AUTHORIZATION_FAILED);
    assert!(refused.resources.is_empty());

    // The ACLs survive a restart.
    b.stop();
    let mut b = Broker::start(&dir, &sets);
    let mut c = Client::connect(b.addr);
    assert_eq!(list_groups(&mut c), vec!["g2".to_string()]);
    assert_eq!(join(&mut c, "g1"), GROUP_AUTHORIZATION_FAILED);

    // DeleteAcls: a topic filter for the principal, and one for the cluster resource.
    let filter = |rt: i8| {
        delete_acls_request::DeleteAclsFilter::default()
            .with_resource_type_filter(rt)
            .with_resource_name_filter(None)
            .with_pattern_type_filter(1)
            .with_principal_filter(Some(s(ANON)))
            .with_host_filter(None)
            .with_operation(1)
            .with_permission_type(1)
    };
    let req = DeleteAclsRequest::default().with_filters(vec![filter(2), filter(4)]);
    let Response::DeleteAcls(r) = c.call(3, Request::DeleteAcls(req)) else {
        panic!()
    };
    assert_eq!(r.filter_results[0].error_code, 0);
    assert_eq!(r.filter_results[0].matching_acls.len(), 1);
    assert_eq!(
        r.filter_results[0].matching_acls[0].resource_name.as_str(),
        "secret"
    );
    assert_eq!(
        r.filter_results[1].matching_acls.len(),
        2,
        "the cluster ACLs"
    );
    let groups = describe_acls(&mut c, 3);
    assert_eq!(groups.error_code, 0);
    let names: Vec<String> = groups
        .resources
        .iter()
        .map(|r| r.resource_name.to_string())
        .collect();
    assert_eq!(names, vec!["g1".to_string(), "g4".to_string()]);
    assert_eq!(
        groups.resources[0].acls.len(),
        2,
        "g1: Read deny, Describe allow"
    );
    assert_eq!(fetch(&mut c, "secret"), 0, "applied without a restart");
    assert_eq!(describe_acls(&mut c, 1).resources.len(), 2);

    // super.users wins over every deny.
    b.stop();
    let b = Broker::start(
        &dir,
        &[
            AUTHORIZER,
            "allow.everyone.if.no.acl.found=true",
            "super.users=User:ANONYMOUS",
        ],
    );
    let mut c = Client::connect(b.addr);
    assert_eq!(commit(&mut c, "g1", "orders"), 0);
    assert_eq!(describe_group(&mut c, "g4").error_code, 0);
    assert_eq!(
        list_groups(&mut c),
        vec!["g1".to_string(), "g2".to_string(), "g4".to_string()]
    );
}

const TRANSACTIONAL_ID_AUTHORIZATION_FAILED: i16 = 53;
/// Every operation a topic supports (`AclEntry.supportedOperations(TOPIC)`), as a bit field.
const ALL_TOPIC_OPS: i32 = 3576;

/// Metadata for `names` (`None`: every topic), auto-creation allowed; (name, error code, topic
/// authorized operations) per topic, and the cluster authorized operations.
fn metadata(
    c: &mut Client,
    version: i16,
    names: Option<&[&str]>,
) -> (Vec<(String, i16, i32)>, i32) {
    let topics = names.map(|ns| {
        ns.iter()
            .map(|n| {
                metadata_request::MetadataRequestTopic::default().with_name(Some(TopicName(s(n))))
            })
            .collect()
    });
    let req = MetadataRequest::default()
        .with_topics(topics)
        .with_allow_auto_topic_creation(true)
        .with_include_topic_authorized_operations(true)
        .with_include_cluster_authorized_operations(version <= 10);
    let Response::Metadata(r) = c.call(version, Request::Metadata(req)) else {
        panic!()
    };
    let mut t: Vec<(String, i16, i32)> = r
        .topics
        .iter()
        .map(|t| {
            let name = t.name.as_ref().map(|n| n.to_string()).unwrap_or_default();
            (name, t.error_code, t.topic_authorized_operations)
        })
        .collect();
    t.sort();
    (t, r.cluster_authorized_operations)
}

fn create_topics(c: &mut Client, name: &str) -> create_topics_response::CreatableTopicResult {
    let req = CreateTopicsRequest::default()
        .with_timeout_ms(5_000)
        .with_topics(vec![create_topics_request::CreatableTopic::default()
            .with_name(TopicName(s(name)))
            .with_num_partitions(1)
            .with_replication_factor(1)]);
    let Response::CreateTopics(r) = c.call(7, Request::CreateTopics(req)) else {
        panic!()
    };
    r.topics.into_iter().next().unwrap()
}

/// DescribeConfigs of one resource: (error code, number of configs).
fn describe_configs(c: &mut Client, resource_type: i8, name: &str) -> (i16, usize) {
    let req = DescribeConfigsRequest::default().with_resources(vec![
        describe_configs_request::DescribeConfigsResource::default()
            .with_resource_type(resource_type)
            .with_resource_name(s(name))
            .with_configuration_keys(None),
    ]);
    let Response::DescribeConfigs(r) = c.call(4, Request::DescribeConfigs(req)) else {
        panic!()
    };
    (r.results[0].error_code, r.results[0].configs.len())
}

fn init_producer_id(c: &mut Client, txn: Option<&str>) -> i16 {
    let req = InitProducerIdRequest::default()
        .with_transactional_id(txn.map(|t| TransactionalId(s(t))))
        .with_transaction_timeout_ms(10_000)
        .with_producer_id(ProducerId(-1))
        .with_producer_epoch(-1);
    let Response::InitProducerId(r) = c.call(4, Request::InitProducerId(req)) else {
        panic!()
    };
    r.error_code
}

fn list_offsets(c: &mut Client, topic: &str) -> i16 {
    use list_offsets_request::*;
    let req = ListOffsetsRequest::default()
        .with_replica_id(BrokerId(-1))
        .with_topics(vec![ListOffsetsTopic::default()
            .with_name(TopicName(s(topic)))
            .with_partitions(vec![ListOffsetsPartition::default()
                .with_partition_index(0)
                .with_current_leader_epoch(-1)
                .with_timestamp(-1)])]);
    let Response::ListOffsets(r) = c.call(7, Request::ListOffsets(req)) else {
        panic!()
    };
    r.topics[0].partitions[0].error_code
}

fn delete_topic(c: &mut Client, topic: &str) -> i16 {
    let req = DeleteTopicsRequest::default()
        .with_timeout_ms(5_000)
        .with_topic_names(vec![TopicName(s(topic))]);
    let Response::DeleteTopics(r) = c.call(4, Request::DeleteTopics(req)) else {
        panic!()
    };
    r.responses[0].error_code
}

#[test]
fn metadata_admin_and_producer_apis_check_acls() {
    let dir = data_dir("acls-admin");
    let b = Broker::start(&dir, &[AUTHORIZER, "allow.everyone.if.no.acl.found=true"]);
    let mut c = Client::connect(b.addr);
    create_topic(&mut c, "orders", 1);
    create_topic(&mut c, "secret", 1);
    // No ACL names anything yet: every operation, the cluster's included.
    let (topics, cluster_ops) = metadata(&mut c, 10, Some(&["orders"]));
    assert_eq!(topics, vec![("orders".into(), 0, ALL_TOPIC_OPS)]);
    // Create, Alter, Describe, ClusterAction, DescribeConfigs, AlterConfigs, IdempotentWrite.
    assert_eq!(
        cluster_ops,
        [5, 7, 8, 9, 10, 11, 12].iter().fold(0, |b, op| b | 1 << op)
    );

    // Alter on the cluster stays allowed so ACLs can still be created; Create and
    // DescribeConfigs on it are denied, and with an ACL on the cluster nothing else is allowed
    // there but the Describe that Alter implies.
    assert_eq!(acl(&mut c, 4, "kafka-cluster", 7, 3), 0, "allow Alter");
    assert_eq!(deny(&mut c, 4, "kafka-cluster", 5), 0, "deny Create");
    assert_eq!(
        deny(&mut c, 4, "kafka-cluster", 10),
        0,
        "deny DescribeConfigs"
    );
    assert_eq!(deny(&mut c, 2, "secret", 8), 0, "deny Describe on secret");
    assert_eq!(
        acl(&mut c, 2, "auto-x", 8, 3),
        0,
        "allow Describe on auto-x"
    );
    assert_eq!(deny(&mut c, 2, "auto-x", 5), 0, "deny Create on auto-x");

    // Metadata: all topics leaves secret out; named, it is refused without saying whether it
    // exists; auto-creation needs Create on the cluster or on the topic.
    let (all, cluster_ops) = metadata(&mut c, 10, None);
    let names: Vec<&str> = all.iter().map(|t| t.0.as_str()).collect();
    assert_eq!(names, vec!["__consumer_offsets", "orders"]);
    assert_eq!(
        cluster_ops,
        1 << 7 | 1 << 8,
        "Alter, and the Describe it implies"
    );
    let (named, _) = metadata(
        &mut c,
        12,
        Some(&["secret", "orders", "auto-x", "auto-y", "nope-hidden"]),
    );
    assert_eq!(
        named,
        vec![
            ("auto-x".into(), TOPIC_AUTHORIZATION_FAILED, i32::MIN),
            ("auto-y".into(), 0, ALL_TOPIC_OPS),
            ("nope-hidden".into(), 0, ALL_TOPIC_OPS),
            ("orders".into(), 0, ALL_TOPIC_OPS),
            ("secret".into(), TOPIC_AUTHORIZATION_FAILED, i32::MIN),
        ],
        "auto-y and nope-hidden created through Create on the topic (no ACL names them)"
    );

    // CreateTopics: Create on the cluster is denied, so Create on the topic decides.
    let refused = create_topics(&mut c, "auto-x");
    assert_eq!(refused.error_code, TOPIC_AUTHORIZATION_FAILED);
    assert_eq!(
        refused.error_message.as_deref(),
        Some("Authorization failed.")
    );
    let created = create_topics(&mut c, "fresh");
    assert_eq!(created.error_code, 0);
    assert_eq!(created.topic_config_error_code, 0);
    assert!(!created.configs.unwrap_or_default().is_empty());
    // A topic the caller may create but not DescribeConfigs: created, configs withheld.
    assert_eq!(
        deny(&mut c, 2, "fresh2", 10),
        0,
        "deny DescribeConfigs on fresh2"
    );
    assert_eq!(acl(&mut c, 2, "fresh2", 5, 3), 0, "allow Create on fresh2");
    let created = create_topics(&mut c, "fresh2");
    assert_eq!(created.error_code, 0);
    assert_eq!(created.topic_config_error_code, TOPIC_AUTHORIZATION_FAILED);
    assert!(created.configs.unwrap_or_default().is_empty());
    assert_eq!(created.num_partitions, -1);

    // DescribeConfigs: the broker needs DescribeConfigs on the cluster, a topic on the topic.
    assert_eq!(
        describe_configs(&mut c, 4, "1"),
        (CLUSTER_AUTHORIZATION_FAILED, 0)
    );
    assert_eq!(
        describe_configs(&mut c, 2, "secret"),
        (TOPIC_AUTHORIZATION_FAILED, 0)
    );
    let (code, n) = describe_configs(&mut c, 2, "orders");
    assert_eq!(code, 0);
    assert!(n > 0);

    // ListOffsets needs Describe, DeleteTopics Delete (secret is named by an ACL: neither).
    assert_eq!(list_offsets(&mut c, "secret"), TOPIC_AUTHORIZATION_FAILED);
    assert_eq!(list_offsets(&mut c, "orders"), 0);
    assert_eq!(delete_topic(&mut c, "secret"), TOPIC_AUTHORIZATION_FAILED);

    // InitProducerId: Write on the transactional id; idempotent, IdempotentWrite on the
    // cluster or Write on some topic (no ACL names IdempotentWrite: Write on topics decides).
    assert_eq!(deny(&mut c, 5, "tx1", 4), 0, "deny Write on tx1");
    assert_eq!(
        init_producer_id(&mut c, Some("tx1")),
        TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    );
    assert_eq!(init_producer_id(&mut c, None), 0);
    assert_eq!(deny(&mut c, 2, "*", 4), 0, "deny Write on every topic");
    assert_eq!(init_producer_id(&mut c, None), CLUSTER_AUTHORIZATION_FAILED);

    // The SCRAM credential APIs: Describe / Alter on the cluster. Denying Alter last (it also
    // guards the ACL APIs).
    assert_eq!(deny(&mut c, 4, "kafka-cluster", 8), 0, "deny Describe");
    let (_, cluster_ops) = metadata(&mut c, 10, Some(&["orders"]));
    assert_eq!(cluster_ops, 0, "no Describe on the cluster");
    let describe = || DescribeUserScramCredentialsRequest::default().with_users(None);
    let Response::DescribeUserScramCredentials(r) =
        c.call(0, Request::DescribeUserScramCredentials(describe()))
    else {
        panic!()
    };
    assert_eq!(r.error_code, CLUSTER_AUTHORIZATION_FAILED);
    assert!(r.results.is_empty());
    assert_eq!(deny(&mut c, 4, "kafka-cluster", 7), 0, "deny Alter");
    let alter = AlterUserScramCredentialsRequest::default().with_upsertions(vec![
        alter_user_scram_credentials_request::ScramCredentialUpsertion::default()
            .with_name(s("bob"))
            .with_mechanism(1)
            .with_iterations(8192)
            .with_salt(bytes::Bytes::from_static(b"salt"))
            .with_salted_password(bytes::Bytes::from(vec![1u8; 32])),
    ]);
    let Response::AlterUserScramCredentials(r) =
        c.call(0, Request::AlterUserScramCredentials(alter))
    else {
        panic!()
    };
    assert_eq!(r.results.len(), 1);
    assert_eq!(r.results[0].user.as_str(), "bob");
    assert_eq!(r.results[0].error_code, CLUSTER_AUTHORIZATION_FAILED);
}

/// DescribeClientQuotas needs DESCRIBE_CONFIGS on the cluster (`KafkaApis`).
#[test]
fn describe_client_quotas_needs_describe_configs_on_the_cluster() {
    let dir = data_dir("acls-client-quotas");
    let sets = [AUTHORIZER, "allow.everyone.if.no.acl.found=true"];
    let b = Broker::start(&dir, &sets);
    let mut c = Client::connect(b.addr);
    let quotas = |c: &mut Client| {
        let Response::DescribeClientQuotas(r) = c.call(
            1,
            Request::DescribeClientQuotas(DescribeClientQuotasRequest::default()),
        ) else {
            panic!()
        };
        r
    };
    let r = quotas(&mut c);
    assert_eq!((r.error_code, r.entries), (0, Some(vec![])));
    assert_eq!(
        deny(&mut c, 4, "kafka-cluster", 10),
        0,
        "deny DescribeConfigs"
    );
    let r = quotas(&mut c);
    assert_eq!(r.error_code, CLUSTER_AUTHORIZATION_FAILED);
    // Kafka's ApiError.fromThrowable drops the exception's default message.
    assert_eq!(r.error_message, None);
    assert_eq!(r.entries, None);
}

/// DescribeQuorum needs DESCRIBE, AddRaftVoter, RemoveRaftVoter and ElectLeaders ALTER on the cluster
/// (`KafkaApis`, `ControllerApis`); allowed, a single node answers that it has no quorum (it
/// is no cluster).
#[test]
fn quorum_apis_need_describe_and_alter_on_the_cluster() {
    const UNSUPPORTED_VERSION: i16 = 35;
    let dir = data_dir("acls-quorum");
    let sets = [AUTHORIZER, "allow.everyone.if.no.acl.found=true"];
    let b = Broker::start(&dir, &sets);
    let mut c = Client::connect(b.addr);
    let describe = |c: &mut Client| {
        let Response::DescribeQuorum(r) =
            c.call(2, Request::DescribeQuorum(DescribeQuorumRequest::default()))
        else {
            panic!()
        };
        r
    };
    let remove = |c: &mut Client| {
        let req = RemoveRaftVoterRequest::default()
            .with_cluster_id(None)
            .with_voter_id(2);
        let Response::RemoveRaftVoter(r) = c.call(0, Request::RemoveRaftVoter(req)) else {
            panic!()
        };
        r
    };
    let add = |c: &mut Client| {
        let req = AddRaftVoterRequest::default()
            .with_cluster_id(None)
            .with_voter_id(4);
        let Response::AddRaftVoter(r) = c.call(0, Request::AddRaftVoter(req)) else {
            panic!()
        };
        r
    };
    assert_eq!(
        describe(&mut c).error_code,
        INVALID_REQUEST,
        "a single node"
    );
    let r = add(&mut c);
    assert_eq!(r.error_code, UNSUPPORTED_VERSION, "a single node: {r:?}");
    let r = remove(&mut c);
    assert_eq!(r.error_code, UNSUPPORTED_VERSION, "a single node: {r:?}");
    // Alter allowed gives Describe too (Kafka's implied operations); a Describe denied then
    // refuses DescribeQuorum and not the removal, an Alter denied refuses the removal.
    assert_eq!(acl(&mut c, 4, "kafka-cluster", 7, 3), 0, "allow Alter");
    assert_eq!(describe(&mut c).error_code, INVALID_REQUEST, "implied");
    assert_eq!(deny(&mut c, 4, "kafka-cluster", 8), 0, "deny Describe");
    assert_eq!(describe(&mut c).error_code, CLUSTER_AUTHORIZATION_FAILED);
    assert_eq!(
        remove(&mut c).error_code,
        UNSUPPORTED_VERSION,
        "Alter allowed"
    );
    assert_eq!(add(&mut c).error_code, UNSUPPORTED_VERSION, "Alter allowed");
    let elect = |c: &mut Client| {
        let req = ElectLeadersRequest::default().with_topic_partitions(Some(vec![
            elect_leaders_request::TopicPartitions::default()
                .with_topic(TopicName(s("__consumer_offsets")))
                .with_partitions(vec![0, 1]),
        ]));
        let Response::ElectLeaders(r) = c.call(2, Request::ElectLeaders(req)) else {
            panic!()
        };
        r
    };
    const ELECTION_NOT_NEEDED: i16 = 84;
    let r = elect(&mut c);
    assert_eq!(r.error_code, 0, "Alter allowed: {r:?}");
    assert!(r.replica_election_results[0]
        .partition_result
        .iter()
        .all(|p| p.error_code == ELECTION_NOT_NEEDED));
    assert_eq!(deny(&mut c, 4, "kafka-cluster", 7), 0, "deny Alter");
    assert_eq!(remove(&mut c).error_code, CLUSTER_AUTHORIZATION_FAILED);
    assert_eq!(add(&mut c).error_code, CLUSTER_AUTHORIZATION_FAILED);
    // ElectLeaders (ALTER on the cluster, `ControllerApis.handleElectLeaders`): refused at the
    // top and for every named partition.
    let r = elect(&mut c);
    assert_eq!(r.error_code, CLUSTER_AUTHORIZATION_FAILED);
    let codes: Vec<(i32, i16)> = r.replica_election_results[0]
        .partition_result
        .iter()
        .map(|p| (p.partition_id, p.error_code))
        .collect();
    assert_eq!(
        codes,
        [
            (0, CLUSTER_AUTHORIZATION_FAILED),
            (1, CLUSTER_AUTHORIZATION_FAILED)
        ]
    );
}

/// DescribeLogDirs: the node's data directory (absolute, on a volume with its sizes) and the
/// partition logs in it that were asked for (a null list: all; a partition that does not exist
/// is left out); DESCRIBE on the cluster, else CLUSTER_AUTHORIZATION_FAILED at the top (v3+) and
/// no results (`KafkaApis.handleDescribeLogDirsRequest`).
#[test]
fn describe_log_dirs_lists_the_logs_and_needs_describe_on_the_cluster() {
    let dir = data_dir("acls-log-dirs");
    let b = Broker::start(&dir, &[AUTHORIZER, "allow.everyone.if.no.acl.found=true"]);
    let mut c = Client::connect(b.addr);
    let describe = |c: &mut Client, version: i16, topics: Option<Vec<(&str, Vec<i32>)>>| {
        let req = DescribeLogDirsRequest::default().with_topics(topics.map(|ts| {
            ts.into_iter()
                .map(|(t, ps)| {
                    describe_log_dirs_request::DescribableLogDirTopic::default()
                        .with_topic(TopicName(s(t)))
                        .with_partitions(ps)
                })
                .collect()
        }));
        let Response::DescribeLogDirs(r) = c.call(version, Request::DescribeLogDirs(req)) else {
            panic!()
        };
        r
    };
    let r = describe(&mut c, 4, None);
    assert_eq!(r.error_code, 0);
    let [d] = &r.results[..] else {
        panic!("one log directory: {r:?}")
    };
    assert_eq!(d.error_code, 0);
    let path = std::path::Path::new(d.log_dir.as_str());
    assert!(path.is_absolute() && path.is_dir(), "{:?}", d.log_dir);
    assert_eq!(path, std::fs::canonicalize(&dir).unwrap());
    assert!(
        d.total_bytes > 0 && (0..=d.total_bytes).contains(&d.usable_bytes),
        "{d:?}"
    );
    let offsets = d
        .topics
        .iter()
        .find(|t| t.name.0.as_str() == "__consumer_offsets")
        .expect("the offsets topic's logs");
    assert_eq!(offsets.partitions.len(), 50, "every offsets partition");
    assert!(offsets
        .partitions
        .iter()
        .all(|p| p.offset_lag == 0 && !p.is_future_key && p.partition_size >= 0));
    // Asked for: the existing partition only.
    let r = describe(
        &mut c,
        4,
        Some(vec![("__consumer_offsets", vec![3, 99]), ("nope", vec![0])]),
    );
    let names: Vec<(String, Vec<i32>)> = r.results[0]
        .topics
        .iter()
        .map(|t| {
            (
                t.name.0.to_string(),
                t.partitions.iter().map(|p| p.partition_index).collect(),
            )
        })
        .collect();
    assert_eq!(names, [("__consumer_offsets".to_string(), vec![3])]);
    assert_eq!(deny(&mut c, 4, "kafka-cluster", 8), 0, "deny Describe");
    let r = describe(&mut c, 4, None);
    assert_eq!(
        (r.error_code, r.results.len()),
        (CLUSTER_AUTHORIZATION_FAILED, 0)
    );
    // Before v3 the response has no error code: only the results go.
    let r = describe(&mut c, 2, None);
    assert_eq!((r.error_code, r.results.len()), (0, 0));
}

/// A regex subscription resolves only to the topics the member may Describe (Kafka 4.x
/// `GroupMetadataManager.refreshRegularExpressions`): the denied topic is neither assigned nor
/// named in the group's resolved regex.
#[test]
fn a_regex_subscription_matches_only_describable_topics() {
    let dir = data_dir("acls-regex");
    let b = Broker::start(&dir, &[AUTHORIZER, "allow.everyone.if.no.acl.found=true"]);
    let mut c = Client::connect(b.addr);
    create_topic(&mut c, "audit-open", 2);
    create_topic(&mut c, "audit-secret", 3);
    assert_eq!(deny(&mut c, 2, "audit-secret", 8), 0, "deny Describe");
    let req = ConsumerGroupHeartbeatRequest::default()
        .with_group_id(GroupId(s("regex-group")))
        .with_member_id(s("m-regex-0123456789012345"))
        .with_member_epoch(0)
        .with_rebalance_timeout_ms(10_000)
        .with_subscribed_topic_regex(Some(s("audit-.*")))
        .with_topic_partitions(Some(vec![]));
    let Response::ConsumerGroupHeartbeat(r) = c.call(1, Request::ConsumerGroupHeartbeat(req))
    else {
        panic!()
    };
    assert_eq!(r.error_code, 0, "{:?}", r.error_message);
    let assigned: Vec<(uuid::Uuid, usize)> = r
        .assignment
        .expect("an assignment")
        .topic_partitions
        .iter()
        .map(|t| (t.topic_id, t.partitions.len()))
        .collect();
    // Only audit-open's two partitions; audit-secret (3) would make five.
    assert_eq!(assigned.len(), 1, "{assigned:?}");
    assert_eq!(assigned[0].1, 2, "{assigned:?}");
    // The group's description names only the describable topic's partitions too.
    let req =
        ConsumerGroupDescribeRequest::default().with_group_ids(vec![GroupId(s("regex-group"))]);
    let Response::ConsumerGroupDescribe(d) = c.call(0, Request::ConsumerGroupDescribe(req)) else {
        panic!()
    };
    let names: Vec<String> = d.groups[0].members[0]
        .assignment
        .topic_partitions
        .iter()
        .map(|t| t.topic_name.to_string())
        .collect();
    assert_eq!(names, vec!["audit-open".to_string()]);
}

/// AlterPartitionReassignments and ListPartitionReassignments on a single node: its one replica
/// of every partition can only "move" to itself (a no-op, as in Kafka), anywhere else names a
/// node that is not registered; nothing is ever under way; ALTER and DESCRIBE on the cluster
/// are needed, refused ones echoing every partition asked with the error (Kafka's
/// `getErrorResponse`).
#[test]
fn partition_reassignments_on_one_node_and_their_cluster_permissions() {
    let dir = data_dir("acls-reassign");
    let b = Broker::start(&dir, &[AUTHORIZER, "allow.everyone.if.no.acl.found=true"]);
    let mut c = Client::connect(b.addr);
    create_topic(&mut c, "moves", 2);
    let Response::Metadata(md) = c.call(12, Request::Metadata(MetadataRequest::default())) else {
        panic!()
    };
    let me = md.brokers[0].node_id.0;
    let alter = |c: &mut Client, moves: Vec<(&str, i32, Option<Vec<i32>>)>| {
        let mut topics: Vec<alter_partition_reassignments_request::ReassignableTopic> = Vec::new();
        for (t, p, rs) in moves {
            topics.push(
                alter_partition_reassignments_request::ReassignableTopic::default()
                    .with_name(TopicName(s(t)))
                    .with_partitions(vec![
                        alter_partition_reassignments_request::ReassignablePartition::default()
                            .with_partition_index(p)
                            .with_replicas(rs.map(|r| r.into_iter().map(BrokerId).collect())),
                    ]),
            );
        }
        let req = AlterPartitionReassignmentsRequest::default().with_topics(topics);
        let Response::AlterPartitionReassignments(r) =
            c.call(1, Request::AlterPartitionReassignments(req))
        else {
            panic!()
        };
        r
    };
    let list = |c: &mut Client| {
        let req = ListPartitionReassignmentsRequest::default().with_topics(None);
        let Response::ListPartitionReassignments(r) =
            c.call(0, Request::ListPartitionReassignments(req))
        else {
            panic!()
        };
        r
    };
    let r = alter(
        &mut c,
        vec![
            ("moves", 0, Some(vec![me])),
            ("moves", 1, Some(vec![me + 1])),
            ("moves", 1, None),
            ("moves", 7, Some(vec![me])),
            ("nope", 0, Some(vec![me])),
            ("moves", 0, Some(vec![me, me])),
        ],
    );
    assert_eq!((r.error_code, &r.error_message), (0, &None));
    let got: Vec<(String, i32, i16, Option<String>)> = r
        .responses
        .iter()
        .flat_map(|t| {
            t.partitions.iter().map(|p| {
                (
                    t.name.0.to_string(),
                    p.partition_index,
                    p.error_code,
                    p.error_message.as_ref().map(|m| m.to_string()),
                )
            })
        })
        .collect();
    let unregistered = format!(
        "The manual partition assignment includes broker {}, but no such broker is registered.",
        me + 1
    );
    assert_eq!(
        got,
        [
            ("moves".into(), 0, 0, None),
            ("moves".into(), 1, 39, Some(unregistered)),
            ("moves".into(), 1, 85, None),
            (
                "moves".into(),
                7,
                3,
                Some("Unable to find partition moves:7.".into())
            ),
            (
                "nope".into(),
                0,
                3,
                Some("Unable to find a topic named nope.".into())
            ),
            (
                "moves".into(),
                0,
                39,
                Some(format!(
                    "The manual partition assignment includes the broker {me} more than once."
                ))
            ),
        ]
    );
    let l = list(&mut c);
    assert_eq!(
        (l.error_code, l.topics.len(), &l.error_message),
        (0, 0, &None)
    );
    // Cluster resource (4): deny Describe (8). An ACL on the cluster now, Alter has no ALLOW
    // either (allow.everyone.if.no.acl.found no longer applies): both are refused.
    assert_eq!(deny(&mut c, 4, "kafka-cluster", 8), 0, "deny Describe");
    let r = alter(&mut c, vec![("moves", 0, Some(vec![me]))]);
    assert_eq!(r.error_code, CLUSTER_AUTHORIZATION_FAILED);
    assert_eq!(
        r.responses[0].partitions[0].error_code, CLUSTER_AUTHORIZATION_FAILED,
        "every partition asked carries it"
    );
    assert_eq!(list(&mut c).error_code, CLUSTER_AUTHORIZATION_FAILED);
}
