"""aiokafka 0.14 classic group consumers against Ringleader: ApiVersions v0, FindCoordinator v1,
JoinGroup v5 (MEMBER_ID_REQUIRED then rejoin), SyncGroup v3, Heartbeat v1, OffsetCommit v3,
OffsetFetch v3, LeaveGroup v1 on stop(); admin DescribeGroups / ListGroups / OffsetFetch."""

from __future__ import annotations

import asyncio
import struct
import time

from aiokafka import AIOKafkaConsumer, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient
from aiokafka.coordinator.assignors.range import RangePartitionAssignor
from aiokafka.structs import OffsetAndMetadata

import pytest

from harness import Reader, confluent_admin, confluent_create

TOPIC = "aio-orders"


def run(coro, timeout=90):
    return asyncio.run(asyncio.wait_for(coro, timeout))


@pytest.fixture
def gbroker(start_broker):
    b = start_broker("group.initial.rebalance.delay.ms=0")
    assert confluent_create(confluent_admin(b), TOPIC, partitions=6) is None
    return b


def aio_consumer(broker, group, client_id, **extra):
    conf = dict(bootstrap_servers=broker.bootstrap, group_id=group, client_id=client_id,
                enable_auto_commit=False, auto_offset_reset="earliest", session_timeout_ms=10000,
                heartbeat_interval_ms=1000, fetch_max_wait_ms=100, request_timeout_ms=15000,
                retry_backoff_ms=100)
    conf.update(extra)
    return AIOKafkaConsumer(TOPIC, **conf)


async def wait_for(pred, timeout, what):
    deadline = time.monotonic() + timeout
    while not pred():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        await asyncio.sleep(0.05)


def parts(consumer) -> list[int]:
    return sorted(tp.partition for tp in consumer.assignment())


def decode_assignment(data: bytes) -> dict[str, list[int]]:
    """ConsumerProtocolAssignment (v0-3 share this prefix): version, [topic, [partition]], user data."""
    r = Reader(data)
    r.take(">h")
    out = {}
    for _ in range(r.take(">i")):
        topic = r.string()
        out[topic] = sorted(r.take(">i") for _ in range(r.take(">i")))
    return out


async def describe(admin, group):
    (resp,) = await admin.describe_consumer_groups([group])
    (g,) = resp.to_object()["groups"]
    return g


def test_aiokafka_join_commit_committed_stop_leaves(gbroker):
    async def main():
        admin = AIOKafkaAdminClient(bootstrap_servers=gbroker.bootstrap, request_timeout_ms=10000,
                                    client_id="ringleader-test-aio-admin")
        await admin.start()
        c = aio_consumer(gbroker, "aio-g", "aio-consumer")
        try:
            await c.start()
            await wait_for(lambda: parts(c) == list(range(6)), 30, "aiokafka owning aio-orders[0..5]")
            member_id, gen = c._coordinator.member_id, c._coordinator.generation
            assert gen >= 1
            assert member_id.startswith("aio-consumer-")

            # commit offsets with metadata (OffsetCommit v3 with member id + generation)
            await c.commit({TopicPartition(TOPIC, p): OffsetAndMetadata(1000 + p, f"aio-{p}") for p in range(6)})
            got = [await c.committed(TopicPartition(TOPIC, p)) for p in range(6)]
            assert got == [1000 + p for p in range(6)]

            g = await describe(admin, "aio-g")
            assert (g["error_code"], g["state"], g["protocol_type"], g["protocol"]) == \
                (0, "Stable", "consumer", "roundrobin"), g
            (m,) = g["members"]
            assert (m["member_id"], m["client_id"], m["client_host"]) == (member_id, "aio-consumer", "/127.0.0.1")
            assert decode_assignment(m["member_assignment"]) == {TOPIC: list(range(6))}
        finally:
            await c.stop()  # LeaveGroup v1
        try:
            g = await describe(admin, "aio-g")
            offsets = await admin.list_consumer_group_offsets("aio-g")
            listed = await admin.list_consumer_groups()
        finally:
            await admin.close()
        return g, offsets, listed

    g, offsets, listed = run(main())
    assert (g["error_code"], g["state"], g["members"]) == (0, "Empty", []), g
    assert {tp.partition: (om.offset, om.metadata) for tp, om in offsets.items() if tp.topic == TOPIC} == \
        {p: (1000 + p, f"aio-{p}") for p in range(6)}
    assert "aio-g" in [x[0] for x in listed], listed


def test_aiokafka_two_consumers_range_split_and_takeover(gbroker):
    async def main():
        a = aio_consumer(gbroker, "aio-split", "aio-a", partition_assignment_strategy=(RangePartitionAssignor,))
        b = aio_consumer(gbroker, "aio-split", "aio-b", partition_assignment_strategy=(RangePartitionAssignor,))
        started = []
        try:
            await a.start()
            started.append(a)
            await wait_for(lambda: parts(a) == list(range(6)), 30, "A owning all six")
            gen1 = a._coordinator.generation

            await b.start()
            started.append(b)
            await wait_for(lambda: parts(a) == [0, 1, 2] and parts(b) == [3, 4, 5], 30,
                           f"A=[0,1,2] B=[3,4,5] (A={parts(a)} B={parts(b)})")
            gen2 = a._coordinator.generation
            assert b._coordinator.generation == gen2 > gen1

            # B commits its own partition with the current generation
            await b.commit({TopicPartition(TOPIC, 4): 44})
            assert await a.committed(TopicPartition(TOPIC, 4)) == 44

            await b.stop()
            started.remove(b)
            await wait_for(lambda: parts(a) == list(range(6)), 30, f"A owning all six again (A={parts(a)})")
            assert a._coordinator.generation > gen2
        finally:
            for c in started:
                await c.stop()

    run(main())
