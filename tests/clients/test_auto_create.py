"""auto.create.topics.enable: a Metadata request that allows auto-creation creates an unknown
topic (default config); with --set auto.create.topics.enable=false it does not."""

from __future__ import annotations

import logging
import time

from confluent_kafka import KafkaError, Producer
from kafka.admin import KafkaAdminClient
import kafka.errors as Errors

from harness import CALL_TIMEOUT_S, NODE_ID, confluent_admin, confluent_create, confluent_topics


def _producer(broker):
    return Producer({"bootstrap.servers": broker.bootstrap, "broker.address.family": "v4",
                     "allow.auto.create.topics": True, "socket.timeout.ms": 10000,
                     "client.id": "ringleader-test-autocreate",
                     "logger": logging.getLogger("librdkafka")})


def _metadata_for(producer, topic):
    # Metadata request naming the topic with AllowAutoTopicCreation=true (librdkafka producer)
    return producer.list_topics(topic=topic, timeout=CALL_TIMEOUT_S).topics.get(topic)


def test_metadata_auto_creates_unknown_topic_by_default(broker):
    p = _producer(broker)
    t = _metadata_for(p, "auto-made")
    deadline = time.monotonic() + 10
    while (t is None or t.error is not None) and time.monotonic() < deadline:
        time.sleep(0.3)
        t = _metadata_for(p, "auto-made")
    assert t is not None and t.error is None, f"auto-created topic not usable: {t and t.error}"
    assert len(t.partitions) == 1, "default num.partitions is 1"
    assert t.partitions[0].leader == NODE_ID

    # visible to a different client, via a plain all-topics Metadata (which never auto-creates)
    topics = confluent_topics(confluent_admin(broker))
    assert "auto-made" in topics and len(topics["auto-made"].partitions) == 1


def test_auto_create_with_kafka_python_metadata_request(broker):
    # kafka-python's raw MetadataRequest with allow_auto_topic_creation=True
    from kafka.protocol.metadata import MetadataRequest

    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap, request_timeout_ms=10000,
                             bootstrap_timeout_ms=10000)
    try:
        req = MetadataRequest(topics=[MetadataRequest.MetadataRequestTopic(name="auto-kp")],
                              allow_auto_topic_creation=True)
        resp = admin._manager.run(admin._manager.send, req)
        (t,) = resp.topics
        assert t.name == "auto-kp"
        # Kafka answers LEADER_NOT_AVAILABLE for a topic it just created, or 0 if already ready
        assert t.error_code in (0, Errors.LeaderNotAvailableError.errno), t
        deadline = time.monotonic() + 10
        while True:
            (d,) = admin.describe_topics(["auto-kp"])
            if d["error_code"] == 0 or time.monotonic() > deadline:
                break
            time.sleep(0.3)
        assert d["error_code"] == 0, d
        assert len(d["partitions"]) == 1
    finally:
        admin.close()


def test_auto_create_disabled(start_broker):
    broker = start_broker("auto.create.topics.enable=false")
    p = _producer(broker)
    t = _metadata_for(p, "not-auto")
    assert t is not None, "the requested topic must be in the Metadata response (with an error)"
    assert t.error is not None and t.error.code() == KafkaError.UNKNOWN_TOPIC_OR_PART, t.error
    time.sleep(0.5)
    admin = confluent_admin(broker)
    assert "not-auto" not in confluent_topics(admin)
    # explicit CreateTopics still works
    assert confluent_create(admin, "explicit", partitions=2) is None
    assert len(confluent_topics(admin)["explicit"].partitions) == 2
