"""Topics persist in the data dir across a clean restart, with stable topic ids."""

from __future__ import annotations

import uuid

from kafka.admin import KafkaAdminClient

from harness import CALL_TIMEOUT_S, NODE_ID, confluent_admin, confluent_create, confluent_topic_ids, confluent_topics


def _kp_ids(broker, names):
    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap, request_timeout_ms=10000,
                             bootstrap_timeout_ms=10000)
    try:
        return {t["name"]: (uuid.UUID(str(t["topic_id"])), len(t["partitions"]))
                for t in admin.describe_topics(names)}
    finally:
        admin.close()


def test_topics_survive_restart_with_same_ids(broker):
    admin = confluent_admin(broker)
    layout = {"persist-a": 3, "persist-b": 1, "persist-c": 8}
    for name, n in layout.items():
        assert confluent_create(admin, name, partitions=n) is None

    before = confluent_topic_ids(admin, layout)
    before_kp = _kp_ids(broker, list(layout))
    cluster_before = admin.describe_cluster(request_timeout=15).result(timeout=CALL_TIMEOUT_S).cluster_id
    assert {n: c for n, (_, c) in before.items()} == layout
    assert len({tid for tid, _ in before.values()}) == 3, before
    for name, (tid, _) in before_kp.items():
        assert tid.int != 0, (name, tid)

    broker.restart()  # SIGTERM, asserts exit code 0, starts again on the same port + data dir

    admin2 = confluent_admin(broker)
    after = confluent_topic_ids(admin2, layout)
    assert after == before, f"topic ids/partition counts changed across restart: {before} -> {after}"
    assert _kp_ids(broker, list(layout)) == before_kp

    topics = confluent_topics(admin2)
    for name, n in layout.items():
        assert name in topics, sorted(topics)
        assert sorted(topics[name].partitions) == list(range(n))
        assert {p.leader for p in topics[name].partitions.values()} == {NODE_ID}

    cluster_after = admin2.describe_cluster(request_timeout=15).result(timeout=CALL_TIMEOUT_S).cluster_id
    assert cluster_after == cluster_before, "cluster id must be persisted in the data dir"

    # a second restart, and a create after restart gets a fresh id
    assert confluent_create(admin2, "persist-d", partitions=2) is None
    d_id = confluent_topic_ids(admin2, ["persist-d"])["persist-d"]
    broker.restart()
    admin3 = confluent_admin(broker)
    assert confluent_topic_ids(admin3, list(layout) + ["persist-d"]) == {**before, "persist-d": d_id}
    assert d_id[0] not in {tid for tid, _ in before.values()}
    err = confluent_create(admin3, "persist-a", partitions=3)
    assert err is not None and err.code() == 36, err  # TOPIC_ALREADY_EXISTS


def test_deleted_topic_stays_deleted_after_restart(broker):
    admin = confluent_admin(broker)
    for name in ("gone", "stays"):
        assert confluent_create(admin, name, partitions=2) is None
    stays_id = confluent_topic_ids(admin, ["stays"])["stays"]
    fs = admin.delete_topics(["gone"], request_timeout=15, operation_timeout=10)
    assert fs["gone"].result(timeout=CALL_TIMEOUT_S) is None

    broker.restart()

    admin2 = confluent_admin(broker)
    topics = confluent_topics(admin2)
    assert "gone" not in topics, sorted(topics)
    assert "stays" in topics
    assert confluent_topic_ids(admin2, ["stays"])["stays"] == stays_id


def test_sigint_also_stops_cleanly_and_data_survives(broker):
    import signal

    admin = confluent_admin(broker)
    assert confluent_create(admin, "sigint-topic", partitions=4) is None
    ids = confluent_topic_ids(admin, ["sigint-topic"])
    rc = broker.stop(signal.SIGINT)
    assert rc == 0, f"exit code on SIGINT was {rc}"
    broker.start()
    assert confluent_topic_ids(confluent_admin(broker), ["sigint-topic"]) == ids
