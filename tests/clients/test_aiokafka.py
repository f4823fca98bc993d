"""aiokafka 0.14 against Ringleader: bootstraps with ApiVersions v0, Metadata v5 (non-flexible),
CreateTopics, FindCoordinator v0/v1."""

from __future__ import annotations

import asyncio
import time

from aiokafka import AIOKafkaConsumer
from aiokafka.admin import AIOKafkaAdminClient, NewTopic

from harness import NODE_ID, confluent_admin, confluent_create, confluent_topics


def run(coro, timeout=60):
    return asyncio.run(asyncio.wait_for(coro, timeout))


def test_aiokafka_admin_create_and_describe(broker):
    async def main():
        admin = AIOKafkaAdminClient(bootstrap_servers=broker.bootstrap, request_timeout_ms=10000,
                                    client_id="ringleader-test-aiokafka")
        await admin.start()
        try:
            resp = await admin.create_topics([NewTopic("aio-topic", num_partitions=3, replication_factor=1)])
            errs = [(t[0], t[1]) for t in resp.topic_errors]  # (name, error_code, ...)
            assert errs == [("aio-topic", 0)], resp
            names = await admin.list_topics()
            (desc,) = await admin.describe_topics(["aio-topic"])
            cluster = await admin.describe_cluster()
            return names, desc, cluster
        finally:
            await admin.close()

    names, desc, cluster = run(main())
    assert "aio-topic" in names
    assert desc["topic"] == "aio-topic" and desc["error_code"] == 0, desc
    parts = sorted(desc["partitions"], key=lambda p: p["partition"])
    assert [p["partition"] for p in parts] == [0, 1, 2]
    assert {p["leader"] for p in parts} == {NODE_ID}
    assert cluster["cluster_id"], cluster
    assert [(b["node_id"], b["host"], b["port"]) for b in cluster["brokers"]] == \
        [(NODE_ID, "127.0.0.1", broker.port)]
    # cross-check with another client
    assert len(confluent_topics(confluent_admin(broker))["aio-topic"].partitions) == 3


def test_aiokafka_consumer_bootstrap_sees_topic(broker):
    assert confluent_create(confluent_admin(broker), "aio-seen", partitions=2) is None

    async def main():
        consumer = AIOKafkaConsumer(bootstrap_servers=broker.bootstrap, request_timeout_ms=10000,
                                    client_id="ringleader-test-aiokafka-consumer")
        await consumer.start()  # ApiVersions v0 + Metadata
        try:
            topics = await consumer.topics()  # Metadata for all topics
            cluster = await consumer._client.fetch_all_metadata()
            return topics, cluster.partitions_for_topic("aio-seen")
        finally:
            await consumer.stop()

    topics, parts = run(main())
    assert "aio-seen" in topics, topics
    assert parts == {0, 1}


def test_aiokafka_find_coordinator(broker):
    async def main():
        admin = AIOKafkaAdminClient(bootstrap_servers=broker.bootstrap, request_timeout_ms=10000)
        await admin.start()
        try:
            deadline = time.monotonic() + 15
            while True:
                try:
                    return await admin.find_coordinator("aio-group")
                except Exception as e:  # CoordinatorNotAvailableError while __consumer_offsets is created
                    if type(e).__name__ != "CoordinatorNotAvailableError" or time.monotonic() > deadline:
                        raise
                    await asyncio.sleep(0.3)
        finally:
            await admin.close()

    assert run(main()) == NODE_ID
