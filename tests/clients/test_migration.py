"""Online migration between the classic and the KIP-848 consumer protocols with confluent-kafka
(librdkafka) consumers, as users roll a group from one protocol to the other: each member in
turn restarts with the other `group.protocol` while a producer keeps writing.

Checked from the consumers' own rebalance callbacks, all polled from this one thread (so the
callbacks of all consumers form one ordered history): no partition is ever assigned to a consumer
while another still holds it, every partition ends up owned, and every produced record is
consumed by someone (at least once: a closing member's auto-commit may lag). The group's type
follows the protocol of its members: CONSUMER once one consumer-protocol member joined the classic
group, CLASSIC again once the last one left (`GroupMetadataManager.convertToConsumerGroup`,
`convertToClassicGroup` in Kafka 4.4's group coordinator).
"""

from __future__ import annotations

import logging
import threading
import time

import pytest

from confluent_kafka import Consumer, ConsumerGroupType, Producer

from harness import CALL_TIMEOUT_S, close_quietly, confluent_admin, confluent_create, wait_until

TOPIC = "migrating"
PARTITIONS = 8
FAST = (
    "group.initial.rebalance.delay.ms=0",
    "group.consumer.heartbeat.interval.ms=1000",
    "group.consumer.min.heartbeat.interval.ms=1000",
)


class Ownership:
    """Partition → owning consumer, from the callbacks; a violation is recorded, not raised, so
    it is reported with the whole history."""

    def __init__(self):
        self.owner: dict[int, str] = {}
        self.history: list[tuple[float, str, str, list[int]]] = []
        self.violations: list[str] = []
        self.t0 = time.monotonic()

    def _log(self, name, kind, parts):
        self.history.append((round(time.monotonic() - self.t0, 2), name, kind, parts))

    def callbacks(self, name: str) -> dict:
        def on_assign(consumer, tps):
            parts = sorted(tp.partition for tp in tps)
            self._log(name, "assign", parts)
            for p in parts:
                holder = self.owner.get(p)
                if holder not in (None, name):
                    self.violations.append(f"{name} assigned {p} while {holder} holds it")
                self.owner[p] = name

        def on_revoke(consumer, tps):
            parts = sorted(tp.partition for tp in tps)
            self._log(name, "revoke", parts)
            self.release(name, parts)

        def on_lost(consumer, tps):
            parts = sorted(tp.partition for tp in tps)
            self._log(name, "lost", parts)
            self.violations.append(f"{name} lost {parts}")
            self.release(name, parts)

        return {"on_assign": on_assign, "on_revoke": on_revoke, "on_lost": on_lost}

    def release(self, name: str, parts=None):
        for p in list(self.owner):
            if self.owner[p] == name and (parts is None or p in parts):
                del self.owner[p]

    def __repr__(self):
        return "\n".join(map(str, self.history))


def consumer(broker, protocol: str, name: str, own: Ownership, consumed: set) -> tuple[Consumer, str]:
    conf = {
        "bootstrap.servers": broker.bootstrap,
        "group.id": "rolling",
        "group.protocol": protocol,
        "client.id": name,
        "logger": logging.getLogger("librdkafka"),
        "broker.address.family": "v4",
        "auto.offset.reset": "earliest",
        "enable.auto.commit": True,
        "auto.commit.interval.ms": 200,
        "socket.timeout.ms": 10000,
        "socket.connection.setup.timeout.ms": 5000,
        "reconnect.backoff.max.ms": 1000,
    }
    if protocol == "classic":
        # librdkafka's default strategies (range, roundrobin): eager, every member revokes all.
        conf.update({"session.timeout.ms": 10000, "heartbeat.interval.ms": 500})
    c = Consumer(conf)
    c.subscribe([TOPIC], **own.callbacks(name))
    return c, name


class Group:
    def __init__(self, broker, own: Ownership):
        self.broker, self.own = broker, own
        self.members: dict[str, Consumer] = {}
        self.consumed: set[bytes] = set()

    def add(self, protocol: str, name: str):
        c, _ = consumer(self.broker, protocol, name, self.own, self.consumed)
        self.members[name] = c

    def remove(self, name: str):
        c = self.members.pop(name)
        self.poll_once()
        c.close()  # delivers the revoke callback and leaves the group
        self.own.release(name)

    def poll_once(self):
        for name, c in list(self.members.items()):
            msg = c.poll(0.02)
            if msg is None:
                continue
            assert msg.error() is None or msg.error().code() < 0, (name, msg.error())
            if msg.error() is None:
                self.consumed.add(msg.value())

    def stable(self) -> bool:
        """Every partition owned by a live member, and every live member owns some."""
        owners = self.own.owner
        return (sorted(owners) == list(range(PARTITIONS))
                and set(owners.values()) == set(self.members))

    def settle(self, what: str, timeout: float = 60):
        wait_until(self.stable, timeout, f"{what}\n{self.own}", step=self.poll_once)
        # Stable for a moment: no revocation in flight.
        end = time.monotonic() + 1.5
        while time.monotonic() < end:
            self.poll_once()
        assert self.stable(), f"{what}: unsettled\n{self.own}"


def group_type(admin):
    d = admin.describe_consumer_groups(["rolling"], request_timeout=15)["rolling"].result(timeout=CALL_TIMEOUT_S)
    return d.type, sorted(m.client_id for m in d.members)


@pytest.mark.timeout(300)
def test_rolling_upgrade_and_downgrade_of_a_four_member_group_under_load(start_broker):
    broker = start_broker(*FAST)
    admin = confluent_admin(broker)
    assert confluent_create(admin, TOPIC, partitions=PARTITIONS) is None

    produced: set[bytes] = set()
    stop = threading.Event()
    errors: list = []

    def produce():
        p = Producer({"bootstrap.servers": broker.bootstrap, "broker.address.family": "v4",
                      "linger.ms": 5, "logger": logging.getLogger("librdkafka")})

        def delivered(err, msg):
            if err is None:
                produced.add(msg.value())
            else:
                errors.append(err)
        n = 0
        while not stop.is_set():
            p.produce(TOPIC, value=f"r{n}".encode(), partition=n % PARTITIONS, on_delivery=delivered)
            n += 1
            p.poll(0)
            time.sleep(0.002)
        assert p.flush(30) == 0

    producer = threading.Thread(target=produce, daemon=True)
    producer.start()
    own = Ownership()
    g = Group(broker, own)
    try:
        for i in range(4):
            g.add("classic", f"classic-{i}")
        g.settle("four classic members sharing the partitions")
        assert group_type(admin)[0] == ConsumerGroupType.CLASSIC

        # Rolling upgrade: each classic member restarts with the consumer protocol.
        for i in range(4):
            g.remove(f"classic-{i}")
            g.add("consumer", f"consumer-{i}")
            g.settle(f"upgrade step {i}")
            kind, members = group_type(admin)
            assert kind == ConsumerGroupType.CONSUMER, (i, kind)
            assert members == sorted(g.members), members

        # Rolling downgrade: back to classic, one member at a time.
        for i in range(4):
            g.remove(f"consumer-{i}")
            g.add("classic", f"classic-again-{i}")
            g.settle(f"downgrade step {i}")
            kind, _ = group_type(admin)
            want = ConsumerGroupType.CLASSIC if i == 3 else ConsumerGroupType.CONSUMER
            assert kind == want, (i, kind)

        stop.set()
        producer.join(60)
        assert not errors, errors[:5]
        assert len(produced) > 1000, len(produced)
        wait_until(lambda: produced <= g.consumed, 60, f"every record consumed "
                   f"({len(produced - g.consumed)} of {len(produced)} missing)", step=g.poll_once)
        assert not own.violations, f"{own.violations}\n{own}"
    finally:
        stop.set()
        close_quietly(*g.members.values())


# ------------------------------------------------------------------ partitions added while a group consumes
@pytest.fixture(params=["ringleader", "kafka"])
def target(request, start_broker):
    if request.param == "ringleader":
        return start_broker(*FAST)
    return request.getfixturevalue("kafka_ref")


@pytest.mark.timeout(240)
@pytest.mark.parametrize("protocol", ["classic", "consumer"])
def test_a_partition_increase_reaches_a_consuming_group(target, protocol):
    """CreatePartitions while a two-member group consumes: with the consumer protocol the group's
    subscribed-topics hash changes and the coordinator computes a new target; with the classic
    protocol the leader sees the new count in its metadata and rejoins. Either way the new
    partitions get owners and their records are consumed, and the committed offsets of the old
    partitions are untouched by the change. Run against Ringleader and the reference broker."""
    from confluent_kafka import TopicPartition
    from confluent_kafka.admin import NewPartitions

    topic, group = f"growing-{protocol}", f"g-growing-{protocol}"
    admin = confluent_admin(target)
    assert confluent_create(admin, topic, partitions=2) is None
    own = Ownership()
    consumed: set[bytes] = set()
    members = []
    for i in range(2):
        conf = {
            "bootstrap.servers": target.bootstrap, "group.id": group, "group.protocol": protocol,
            "client.id": f"grow-{i}", "logger": logging.getLogger("librdkafka"), "broker.address.family": "v4",
            "auto.offset.reset": "earliest", "enable.auto.commit": False,
            "topic.metadata.refresh.interval.ms": 1000, "socket.timeout.ms": 10000,
            "reconnect.backoff.max.ms": 1000,
        }
        if protocol == "classic":
            conf.update({"session.timeout.ms": 10000, "heartbeat.interval.ms": 500})
        c = Consumer(conf)
        c.subscribe([topic], **own.callbacks(f"grow-{i}"))
        members.append(c)

    def poll():
        for c in members:
            msg = c.poll(0.05)
            if msg is not None and msg.error() is None:
                consumed.add(msg.value())

    p = Producer({"bootstrap.servers": target.bootstrap, "broker.address.family": "v4",
                  "topic.metadata.refresh.interval.ms": 1000})

    def produce(partitions, tag):
        values = set()
        for part in partitions:
            for n in range(20):
                v = f"{tag}-{part}-{n}".encode()
                p.produce(topic, value=v, partition=part)
                values.add(v)
        assert p.flush(30) == 0
        return values

    try:
        before = produce([0, 1], "before")
        wait_until(lambda: before <= consumed and sorted(own.owner) == [0, 1], 60,
                   f"the old partitions consumed\n{own}", step=poll)
        # Each member commits where its old partitions stand.
        for c in members:
            mine = [TopicPartition(topic, a.partition, 20) for a in c.assignment()]
            if mine:
                c.commit(offsets=mine, asynchronous=False)
        fs = admin.create_partitions([NewPartitions(topic, 6)], request_timeout=CALL_TIMEOUT_S)
        assert fs[topic].result(timeout=CALL_TIMEOUT_S) is None
        # The producer learns the new count from its next metadata request.
        wait_until(lambda: len(p.list_topics(topic, timeout=10).topics[topic].partitions) == 6, 30,
                   "the producer seeing six partitions")
        after = produce(range(6), "after")
        wait_until(lambda: sorted(own.owner) == list(range(6)) and set(own.owner.values()) == {"grow-0", "grow-1"},
                   90, f"all six partitions owned by the two members\n{own}", step=poll)
        wait_until(lambda: after <= consumed, 60, "the records of the new partitions consumed", step=poll)
        got = members[0].committed([TopicPartition(topic, part) for part in range(6)], timeout=CALL_TIMEOUT_S)
        assert {tp.partition: tp.offset for tp in got if tp.offset >= 0} == {0: 20, 1: 20}, got
        assert not own.violations, f"{own.violations}\n{own}"
    finally:
        close_quietly(*members)
