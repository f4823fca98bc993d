"""kafka-python 3.x KafkaAdminClient against Ringleader (ApiVersions v4, Metadata v12,
CreateTopics, FindCoordinator v4+ batch)."""

from __future__ import annotations

import time
import uuid

import pytest
import kafka.errors as Errors
from kafka.admin import KafkaAdminClient

from harness import NODE_ID


@pytest.fixture
def kp_admin(broker):
    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap, client_id="ringleader-test-kafka-python",
                             request_timeout_ms=10000, bootstrap_timeout_ms=10000)
    yield admin
    admin.close()


def _by_name(topics):
    return {t["name"]: t for t in topics}


def test_create_and_describe_topics(broker, kp_admin):
    res = kp_admin.create_topics({"kp-three": {"num_partitions": 3, "replication_factor": 1},
                                  "kp-one": {"num_partitions": 1, "replication_factor": 1}})
    errs = {t["name"]: t["error_code"] for t in res["topics"]}
    assert errs == {"kp-three": 0, "kp-one": 0}, res

    described = _by_name(kp_admin.describe_topics(["kp-three", "kp-one"]))
    assert set(described) == {"kp-three", "kp-one"}
    t3 = described["kp-three"]
    assert t3["error_code"] == 0
    assert t3["is_internal"] is False
    parts = sorted(t3["partitions"], key=lambda p: p["partition_index"])
    assert [p["partition_index"] for p in parts] == [0, 1, 2]
    for p in parts:
        assert p["error_code"] == 0
        assert p["leader_id"] == NODE_ID
        assert list(p["replica_nodes"]) == [NODE_ID]
        assert list(p["isr_nodes"]) == [NODE_ID]
    assert len(described["kp-one"]["partitions"]) == 1

    # Metadata v10+ carries the topic id; it must be a real (non-zero) UUID, distinct per topic.
    # kafka-python reports topic ids as UUID strings
    ids = {name: uuid.UUID(str(t["topic_id"])) for name, t in described.items()}
    for name, tid in ids.items():
        assert tid.int != 0, (name, tid)
    assert ids["kp-three"] != ids["kp-one"]

    # Describing by topic id (Metadata v12 with name=null) returns the same topic.
    by_id = kp_admin.describe_topics([ids["kp-three"]])
    assert [(t["name"], uuid.UUID(str(t["topic_id"])), len(t["partitions"])) for t in by_id] == \
        [("kp-three", ids["kp-three"], 3)]

    assert {"kp-three", "kp-one"} <= set(kp_admin.list_topics())


def test_create_existing_topic_raises(broker, kp_admin):
    kp_admin.create_topics({"kp-dup": {"num_partitions": 2, "replication_factor": 1}})
    with pytest.raises(Errors.TopicAlreadyExistsError):
        kp_admin.create_topics({"kp-dup": {"num_partitions": 2, "replication_factor": 1}})


def test_describe_cluster(broker, kp_admin):
    c = kp_admin.describe_cluster()
    assert c["cluster_id"]
    assert c["controller_id"] == NODE_ID
    assert [(b["broker_id"], b["host"], b["port"]) for b in c["brokers"]] == \
        [(NODE_ID, "127.0.0.1", broker.port)]


def test_describe_unknown_topic_does_not_create_it(broker, kp_admin):
    # KafkaAdminClient sends Metadata with allow_auto_topic_creation=False
    (t,) = kp_admin.describe_topics(["kp-missing"])
    assert t["error_code"] == Errors.UnknownTopicOrPartitionError.errno, t
    time.sleep(0.3)
    assert "kp-missing" not in kp_admin.list_topics()


def find_coordinator_kafka_python(admin, group, timeout=15.0):
    """FindCoordinator via kafka-python's internal helper, retrying while the broker reports
    COORDINATOR_NOT_AVAILABLE (expected right after __consumer_offsets is auto-created)."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            node_id = admin._manager.run(admin._find_coordinator_id, group)
            return node_id, admin._manager.cluster._coordinator_brokers[node_id]
        except (Errors.CoordinatorNotAvailableError, Errors.NodeNotReadyError):
            if time.monotonic() > deadline:
                raise
            time.sleep(0.3)


def test_find_coordinator_kafka_python(broker, kp_admin):
    node_id, coordinator = find_coordinator_kafka_python(kp_admin, "g1")
    assert node_id == NODE_ID
    assert (coordinator.host, coordinator.port) == ("127.0.0.1", broker.port)
