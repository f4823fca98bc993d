"""confluent-kafka (librdkafka 2.16) AdminClient against Ringleader: CreateTopics, Metadata,
DeleteTopics, DescribeTopics, DescribeCluster, DescribeConfigs."""

from __future__ import annotations

import time

from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import ConfigResource, ResourceType

from harness import (CALL_TIMEOUT_S, NODE_ID, confluent_admin, confluent_create, confluent_topic_ids,
                     confluent_topics)

ZERO_UUID_B64 = "AAAAAAAAAAAAAAAAAAAAAA"


def test_create_topic_then_list_shows_partitions_and_leader(broker):
    admin = confluent_admin(broker)
    assert confluent_create(admin, "orders", partitions=3) is None

    md = admin.list_topics(timeout=CALL_TIMEOUT_S)
    assert "orders" in md.topics, sorted(md.topics)
    t = md.topics["orders"]
    assert t.error is None, t.error
    assert sorted(t.partitions) == [0, 1, 2]
    for pid, p in t.partitions.items():
        assert p.id == pid
        assert p.error is None, (pid, p.error)
        assert p.leader == NODE_ID, (pid, p.leader)
        assert list(p.replicas) == [NODE_ID], (pid, p.replicas)
        assert list(p.isrs) == [NODE_ID], (pid, p.isrs)

    # The broker advertises itself (node 1) at the listen address.
    assert set(md.brokers) == {NODE_ID}
    b = md.brokers[NODE_ID]
    assert (b.id, b.host, b.port) == (NODE_ID, "127.0.0.1", broker.port)
    assert md.controller_id == NODE_ID
    assert md.cluster_id, "Metadata must carry a cluster id"


def test_list_topics_for_one_topic_by_name(broker):
    admin = confluent_admin(broker)
    assert confluent_create(admin, "single", partitions=5) is None
    assert confluent_create(admin, "other", partitions=1) is None
    md = admin.list_topics(topic="single", timeout=CALL_TIMEOUT_S)
    assert "single" in md.topics
    assert len(md.topics["single"].partitions) == 5
    assert "other" not in md.topics  # only the requested topic is described


def test_create_existing_topic_gives_topic_already_exists(broker):
    admin = confluent_admin(broker)
    assert confluent_create(admin, "dup", partitions=3) is None
    err = confluent_create(admin, "dup", partitions=3)
    assert err is not None, "second create of the same topic must fail"
    assert err.code() == KafkaError.TOPIC_ALREADY_EXISTS, err
    # and the original topic is untouched
    assert len(confluent_topics(admin)["dup"].partitions) == 3


def test_replication_factor_2_on_single_broker_is_rejected(broker):
    admin = confluent_admin(broker)
    err = confluent_create(admin, "rf2", partitions=1, replication_factor=2)
    assert err is not None
    assert err.code() == KafkaError.INVALID_REPLICATION_FACTOR, err
    assert "rf2" not in confluent_topics(admin)


def test_invalid_topic_name_is_rejected(broker):
    admin = confluent_admin(broker)
    for bad in ("bad name!", "a/b", "x" * 250, ".", ".."):
        err = confluent_create(admin, bad, partitions=1)
        assert err is not None, f"topic name {bad!r} must be rejected"
        assert err.code() == KafkaError.TOPIC_EXCEPTION, (bad, err)  # 17 INVALID_TOPIC_EXCEPTION
    names = set(confluent_topics(admin))
    assert not names & {"bad name!", "a/b", ".", ".."}, names


def test_invalid_partition_count_is_rejected(broker):
    admin = confluent_admin(broker)
    err = confluent_create(admin, "zero-parts", partitions=0)
    assert err is not None
    assert err.code() == KafkaError.INVALID_PARTITIONS, err
    assert "zero-parts" not in confluent_topics(admin)


def test_create_with_broker_default_partitions_and_replication(broker):
    # num_partitions = replication_factor = -1 (CreateTopics v4+): broker defaults num.partitions=1, RF 1
    from confluent_kafka.admin import NewTopic

    admin = confluent_admin(broker)
    fs = admin.create_topics([NewTopic("defaults", num_partitions=-1, replication_factor=-1)], request_timeout=15)
    assert fs["defaults"].result(timeout=CALL_TIMEOUT_S) is None
    t = confluent_topics(admin)["defaults"]
    assert sorted(t.partitions) == [0]
    assert list(t.partitions[0].replicas) == [NODE_ID]


def test_create_several_topics_in_one_request(broker):
    from confluent_kafka.admin import NewTopic

    admin = confluent_admin(broker)
    topics = [NewTopic("multi-a", 1, 1), NewTopic("multi-b", 2, 1), NewTopic("multi-c", 4, 1)]
    fs = admin.create_topics(topics, request_timeout=15)
    for name, f in fs.items():
        assert f.result(timeout=CALL_TIMEOUT_S) is None, name
    got = confluent_topics(admin)
    assert {n: len(got[n].partitions) for n in ("multi-a", "multi-b", "multi-c")} == \
        {"multi-a": 1, "multi-b": 2, "multi-c": 4}


def test_delete_topic_then_list_shows_it_gone(broker):
    admin = confluent_admin(broker)
    assert confluent_create(admin, "doomed", partitions=2) is None
    assert confluent_create(admin, "keeper", partitions=1) is None
    assert "doomed" in confluent_topics(admin)

    fs = admin.delete_topics(["doomed"], request_timeout=15, operation_timeout=10)
    assert fs["doomed"].result(timeout=CALL_TIMEOUT_S) is None

    deadline = time.monotonic() + 10
    while "doomed" in confluent_topics(admin) and time.monotonic() < deadline:
        time.sleep(0.2)
    topics = confluent_topics(admin)
    assert "doomed" not in topics, sorted(topics)
    assert "keeper" in topics and len(topics["keeper"].partitions) == 1

    # deleting it again: UNKNOWN_TOPIC_OR_PART
    fs = admin.delete_topics(["doomed"], request_timeout=15)
    try:
        fs["doomed"].result(timeout=CALL_TIMEOUT_S)
        raise AssertionError("deleting a missing topic must fail")
    except KafkaException as e:
        assert e.args[0].code() == KafkaError.UNKNOWN_TOPIC_OR_PART, e

    # and the name can be reused with a new topic id
    assert confluent_create(admin, "doomed", partitions=4) is None
    assert len(confluent_topics(admin)["doomed"].partitions) == 4


def test_recreated_topic_gets_a_new_topic_id(broker):
    admin = confluent_admin(broker)
    assert confluent_create(admin, "phoenix", partitions=1) is None
    (id1, n1) = confluent_topic_ids(admin, ["phoenix"])["phoenix"]
    fs = admin.delete_topics(["phoenix"], request_timeout=15)
    assert fs["phoenix"].result(timeout=CALL_TIMEOUT_S) is None
    assert confluent_create(admin, "phoenix", partitions=2) is None
    (id2, n2) = confluent_topic_ids(admin, ["phoenix"])["phoenix"]
    assert (n1, n2) == (1, 2)
    assert ZERO_UUID_B64 not in (id1, id2)
    assert id1 != id2, "a re-created topic must get a fresh topic id"


def test_describe_topics_gives_topic_ids(broker):
    admin = confluent_admin(broker)
    for name, n in (("ids-a", 3), ("ids-b", 1)):
        assert confluent_create(admin, name, partitions=n) is None
    ids = confluent_topic_ids(admin, ["ids-a", "ids-b"])
    assert ids["ids-a"][1] == 3 and ids["ids-b"][1] == 1
    assert ids["ids-a"][0] != ids["ids-b"][0]
    for name, (tid, _) in ids.items():
        assert tid and tid != ZERO_UUID_B64, (name, tid)


def test_describe_unknown_topic_fails(broker):
    from confluent_kafka import TopicCollection

    admin = confluent_admin(broker)
    fs = admin.describe_topics(TopicCollection(["no-such-topic"]), request_timeout=15)
    try:
        fs["no-such-topic"].result(timeout=CALL_TIMEOUT_S)
        raise AssertionError("describing a missing topic must fail")
    except KafkaException as e:
        assert e.args[0].code() == KafkaError.UNKNOWN_TOPIC_OR_PART, e
    assert "no-such-topic" not in confluent_topics(admin), "describe must not auto-create"


def test_describe_cluster(broker):
    admin = confluent_admin(broker)
    res = admin.describe_cluster(request_timeout=15).result(timeout=CALL_TIMEOUT_S)
    assert res.cluster_id, "cluster id must be non-empty"
    assert [(n.id, n.host, n.port) for n in res.nodes] == [(NODE_ID, "127.0.0.1", broker.port)]
    assert res.controller is not None and res.controller.id == NODE_ID
    md = admin.list_topics(timeout=CALL_TIMEOUT_S)
    assert md.cluster_id == res.cluster_id, "Metadata and DescribeCluster must agree on the cluster id"


def test_describe_configs_topic_and_broker(start_broker):
    broker = start_broker("auto.create.topics.enable=false")
    admin = confluent_admin(broker)
    assert confluent_create(admin, "cfg-topic", partitions=1) is None

    topic_res = ConfigResource(ResourceType.TOPIC, "cfg-topic")
    broker_res = ConfigResource(ResourceType.BROKER, str(NODE_ID))
    fs = admin.describe_configs([topic_res, broker_res], request_timeout=15)
    results = {r.restype: f.result(timeout=CALL_TIMEOUT_S) for r, f in fs.items()}

    topic_cfg = results[ResourceType.TOPIC]
    assert "cleanup.policy" in topic_cfg, sorted(topic_cfg)
    assert topic_cfg["cleanup.policy"].value == "delete"

    broker_cfg = results[ResourceType.BROKER]
    assert "auto.create.topics.enable" in broker_cfg, sorted(broker_cfg)
    assert broker_cfg["auto.create.topics.enable"].value == "false"


def test_create_partitions_grows_a_topic_and_refuses_a_decrease(broker):
    from confluent_kafka.admin import NewPartitions

    admin = confluent_admin(broker)
    assert confluent_create(admin, "growing", partitions=2) is None

    # validate_only: the answer of a real change, and nothing changes.
    fs = admin.create_partitions([NewPartitions("growing", 5)], validate_only=True,
                                 request_timeout=CALL_TIMEOUT_S)
    assert fs["growing"].result(timeout=CALL_TIMEOUT_S) is None
    assert len(confluent_topics(admin)["growing"].partitions) == 2

    fs = admin.create_partitions([NewPartitions("growing", 5)], request_timeout=CALL_TIMEOUT_S)
    assert fs["growing"].result(timeout=CALL_TIMEOUT_S) is None
    assert sorted(confluent_topics(admin)["growing"].partitions) == [0, 1, 2, 3, 4]

    # Kafka's answer to a count that is not an increase, and to an unknown topic.
    for count, expected in ((3, "would not be an increase"), (5, "already has 5 partition(s)")):
        fs = admin.create_partitions([NewPartitions("growing", count)],
                                     request_timeout=CALL_TIMEOUT_S)
        try:
            fs["growing"].result(timeout=CALL_TIMEOUT_S)
            raise AssertionError(f"a count of {count} must be refused")
        except KafkaException as e:
            err = e.args[0]
            assert err.code() == KafkaError.INVALID_PARTITIONS, err
            assert expected in err.str(), err.str()
    fs = admin.create_partitions([NewPartitions("no-such-topic", 3)], request_timeout=CALL_TIMEOUT_S)
    try:
        fs["no-such-topic"].result(timeout=CALL_TIMEOUT_S)
        raise AssertionError("an unknown topic must be refused")
    except KafkaException as e:
        assert e.args[0].code() == KafkaError.UNKNOWN_TOPIC_OR_PART, e.args[0]
    assert len(confluent_topics(admin)["growing"].partitions) == 5
