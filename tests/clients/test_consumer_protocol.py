"""confluent-kafka 2.16.1 (bundled librdkafka 2.16.0) KIP-848 consumers (`group.protocol=consumer`)
against Ringleader: ConsumerGroupHeartbeat v1, OffsetCommit/OffsetFetch v9 with member epochs,
ConsumerGroupDescribe v0 and ListGroups v5 through the AdminClient.

The seed walkthrough (reference §10, Example 1 consumer protocol) is reproduced: A alone owns
orders[0..5]; B joins; A revokes only [3,4,5] (not everything) before B is given [3,4,5]; B's
close hands all six back to A. The broker runs with a 1 s heartbeat interval (Kafka's default is
5 s) so the waits stay short; every wait is bounded.

Also: describe_consumer_groups of a classic group (ConsumerGroupDescribe → GROUP_ID_NOT_FOUND →
DescribeGroups fallback), commits with member epochs, a regex subscription picking up a topic
created later, a classic consumer joining a KIP-848 group (online migration), and raw DescribeGroups v3/v6 of a KIP-848
group (Kafka 4 answers "Dead" / "Group X is not a classic group.").
"""

from __future__ import annotations

import logging
import struct
import time

import pytest

from confluent_kafka import Consumer, ConsumerGroupState, ConsumerGroupType, TopicPartition

from harness import (CALL_TIMEOUT_S, assigned, close_quietly, committed, Reader, confluent_admin, confluent_consumer, confluent_create, connect,
                     kstring, recv_frame, request_frame, wait_until)

ALL6 = [0, 1, 2, 3, 4, 5]
FAST_HEARTBEATS = (
    "group.initial.rebalance.delay.ms=0",
    "group.consumer.heartbeat.interval.ms=1000",
    "group.consumer.min.heartbeat.interval.ms=1000",
)
JOIN_GROUP = 11
INCONSISTENT_GROUP_PROTOCOL = 23
MEMBER_ID_REQUIRED = 79


@pytest.fixture
def cbroker(start_broker):
    return start_broker(*FAST_HEARTBEATS)


def kip848_consumer(broker, group: str, client_id: str, **extra) -> Consumer:
    """A librdkafka consumer speaking the KIP-848 protocol. session.timeout.ms, heartbeat.interval.ms
    and partition.assignment.strategy are broker-side settings with this protocol (librdkafka
    refuses them), so only the bounded socket settings are set here."""
    conf = {
        "bootstrap.servers": broker.bootstrap,
        "group.id": group,
        "group.protocol": "consumer",
        "client.id": client_id,
        "logger": logging.getLogger("librdkafka"),
        "broker.address.family": "v4",
        "enable.auto.commit": False,
        "auto.offset.reset": "earliest",
        "socket.timeout.ms": 10000,
        "socket.connection.setup.timeout.ms": 5000,
        "reconnect.backoff.max.ms": 1000,
    }
    conf.update({k.replace("_", "."): v for k, v in extra.items()})
    return Consumer(conf)


class Recorder:
    """Records on_assign / on_revoke callbacks (incremental with this protocol) of several consumers
    in one ordered list."""

    def __init__(self):
        self.t0 = time.monotonic()
        self.events: list[tuple[float, str, str, list]] = []

    def callbacks(self, name: str):
        def on_assign(consumer, parts):
            self.events.append((round(time.monotonic() - self.t0, 2), name, "assign", tps(parts)))

        def on_revoke(consumer, parts):
            self.events.append((round(time.monotonic() - self.t0, 2), name, "revoke", tps(parts)))

        return {"on_assign": on_assign, "on_revoke": on_revoke}

    def of(self, name: str) -> list[tuple[str, list]]:
        return [(kind, parts) for _, n, kind, parts in self.events if n == name]

    def index(self, name: str, kind: str, parts) -> int:
        for i, (_, n, k, p) in enumerate(self.events):
            if (n, k, p) == (name, kind, parts):
                return i
        raise AssertionError(f"no {name} {kind} {parts}\n{self}")

    def __repr__(self) -> str:
        return "\n".join(map(str, self.events))


def tps(parts) -> list:
    """Partitions of one topic as a sorted list of ints; of several topics as sorted (topic, p)."""
    topics = {p.topic for p in parts}
    if len(topics) <= 1:
        return sorted(p.partition for p in parts)
    return sorted((p.topic, p.partition) for p in parts)


def poll_all(*consumers, timeout: float = 0.05):
    def step():
        for c in consumers:
            msg = c.poll(timeout)
            assert msg is None or msg.error() is None or msg.error().code() < 0, msg.error()
    return step


def poll_for(seconds: float, *consumers):
    deadline = time.monotonic() + seconds
    step = poll_all(*consumers)
    while time.monotonic() < deadline:
        step()


def describe(admin, group: str):
    fs = admin.describe_consumer_groups([group], request_timeout=15)
    return fs[group].result(timeout=CALL_TIMEOUT_S)


def member_partitions(member, topic: str = "orders") -> list[int]:
    return sorted(tp.partition for tp in member.assignment.topic_partitions if tp.topic == topic)


# ------------------------------------------------------------------------------------- tests
def test_seed_walkthrough_consumer_protocol(cbroker):
    """(a) A then B on a 6-partition topic: 6 → 3 + 3 with only [3,4,5] moving, revoked by A before
    B gets them; (b) the AdminClient's view of the group while both are stable; B's close returns
    all six to A."""
    admin = confluent_admin(cbroker)
    assert confluent_create(admin, "orders", partitions=6) is None
    rec = Recorder()
    a = kip848_consumer(cbroker, "g-consumer", "consumer-a")
    b = kip848_consumer(cbroker, "g-consumer", "consumer-b")
    try:
        a.subscribe(["orders"], **rec.callbacks("A"))
        wait_until(lambda: rec.of("A"), 30, f"A's first assignment\n{rec}", step=poll_all(a))
        assert rec.of("A") == [("assign", ALL6)], rec
        assert assigned(a) == ALL6

        b.subscribe(["orders"], **rec.callbacks("B"))
        wait_until(lambda: assigned(a) == [0, 1, 2] and assigned(b) == [3, 4, 5], 30,
                   f"A=[0,1,2] and B=[3,4,5]\n{rec}", step=poll_all(a, b))
        # Incremental: A gives up exactly what moves (never everything) and B is given [3,4,5]
        # only after A's revocation (a partition never has two owners).
        revoked_by_a = [parts for kind, parts in rec.of("A") if kind == "revoke"]
        assert revoked_by_a == [[3, 4, 5]], f"A must revoke exactly [3,4,5]\n{rec}"
        assert rec.index("A", "revoke", [3, 4, 5]) < rec.index("B", "assign", [3, 4, 5]), rec
        assert [p for kind, parts in rec.of("B") if kind == "assign" for p in parts] == [3, 4, 5], rec
        assert not [e for e in rec.of("B") if e[0] == "revoke"], rec

        # stable: a few more heartbeats change nothing
        n = len(rec.events)
        poll_for(2.5, a, b)
        assert len(rec.events) == n, f"unexpected reassignment in a stable group\n{rec}"

        # (b) the AdminClient: ConsumerGroupDescribe v0 and ListGroups v5
        d = wait_until(lambda: (lambda d: d if d.state == ConsumerGroupState.STABLE else None)(
            describe(admin, "g-consumer")), 10, "a STABLE description")
        assert d.type == ConsumerGroupType.CONSUMER
        assert d.state == ConsumerGroupState.STABLE
        assert d.partition_assignor == "uniform"
        assert not d.is_simple_consumer_group
        members = {m.client_id: m for m in d.members}
        assert set(members) == {"consumer-a", "consumer-b"}, d.members
        assert members["consumer-a"].member_id == a.memberid()
        assert members["consumer-b"].member_id == b.memberid()
        assert member_partitions(members["consumer-a"]) == [0, 1, 2]
        assert member_partitions(members["consumer-b"]) == [3, 4, 5]
        for m in members.values():
            assert m.target_assignment is not None, m
            assert member_partitions(m) == sorted(tp.partition for tp in m.target_assignment.topic_partitions)
            assert m.group_instance_id is None
            assert m.host, m
        listed = admin.list_consumer_groups(request_timeout=15).result(timeout=CALL_TIMEOUT_S)
        assert not listed.errors, listed.errors
        row = {g.group_id: g for g in listed.valid}["g-consumer"]
        assert row.type == ConsumerGroupType.CONSUMER
        assert row.state == ConsumerGroupState.STABLE
        assert not row.is_simple_consumer_group

        # B closes: it revokes [3,4,5] and leaves with epoch -1; A is given [3,4,5] back.
        b.close()
        assert rec.of("B")[-1] == ("revoke", [3, 4, 5]), rec
        closed_at = time.monotonic()
        wait_until(lambda: assigned(a) == ALL6, 30, f"A owning all six after B left\n{rec}", step=poll_all(a))
        took = time.monotonic() - closed_at
        assert took < 8, f"A took {took:.1f}s to get [3,4,5] back: was B's leave (epoch -1) ignored?\n{rec}"
        assert rec.of("A")[-1] == ("assign", [3, 4, 5]), rec
        assert [e for e in rec.of("A") if e[0] == "revoke"] == [("revoke", [3, 4, 5])], rec
        d = describe(admin, "g-consumer")
        assert [m.client_id for m in d.members] == ["consumer-a"]
        assert member_partitions(d.members[0]) == ALL6
    finally:
        close_quietly(a, b)


def test_a_joining_member_gets_its_partitions_long_before_one_heartbeat_interval(start_broker):
    """librdkafka takes the heartbeat interval from every ConsumerGroupHeartbeat response
    (`rd_kafka_cgrp_handle_ConsumerGroupHeartbeat` stores it in `rkcg_heartbeat_intvl_ms`, which
    `rd_kafka_cgrp_consumer_serve` schedules the next heartbeat with), so Ringleader's short
    interval for a member with partitions still to revoke or to receive
    (`group.consumer.reconciliation.heartbeat.interval.ms`, docs/compatibility.md) hands a joining
    member its partitions without waiting whole heartbeat intervals.

    The group's heartbeat interval is 30 s and its assignment interval 5 s. A owns all six (the
    group is Stable); B joins. By Kafka's rules alone every response says 30 s: A would learn it
    must give up [3,4,5] at its next heartbeat, 30 s after its last, and B would get them at its
    first regular heartbeat, 30 s after joining. Here A is told to come back when the next target
    can be computed (5 s after its own) and every step after that is 100 ms apart, so 3 + 3 well
    within the 20 s allowed — 10 s from either figure; nothing is timed closer than that. (With
    the short interval off the same steps time out: checked by hand.)"""
    broker = start_broker(
        "group.consumer.heartbeat.interval.ms=30000",
        "group.consumer.max.heartbeat.interval.ms=30000",
        "group.consumer.assignment.interval.ms=5000",
        "group.consumer.reconciliation.heartbeat.interval.ms=100",
    )
    admin = confluent_admin(broker)
    assert confluent_create(admin, "orders", partitions=6) is None
    rec = Recorder()
    a = kip848_consumer(broker, "g-stable", "stable-a")
    b = kip848_consumer(broker, "g-stable", "stable-b")
    try:
        a.subscribe(["orders"], **rec.callbacks("A"))
        wait_until(lambda: assigned(a) == ALL6, 30, f"A owning all six\n{rec}", step=poll_all(a))
        b.subscribe(["orders"], **rec.callbacks("B"))
        joined = time.monotonic()
        wait_until(lambda: len(assigned(a)) == 3 and len(assigned(b)) == 3, 20,
                   f"3 + 3 well within one 30 s heartbeat interval\n{rec}", step=poll_all(a, b))
        took = time.monotonic() - joined
        assert sorted(assigned(a) + assigned(b)) == ALL6
        moved = assigned(b)
        assert rec.index("A", "revoke", moved) < rec.index("B", "assign", moved), rec
        logging.getLogger(__name__).info("B joined a stable group; 3 + 3 after %.2f s", took)
    finally:
        close_quietly(a, b)


def test_describe_classic_group_while_consumer_group_describe_is_advertised(cbroker):
    """(b) librdkafka sends ConsumerGroupDescribe first; the broker answers a classic group with
    GROUP_ID_NOT_FOUND ("... is not a consumer group.") and the client falls back to DescribeGroups,
    so describe_consumer_groups still reports the classic group, its state and members."""
    admin = confluent_admin(cbroker)
    assert confluent_create(admin, "classic-topic", partitions=2) is None
    c = confluent_consumer(cbroker, "g-classic-desc", client_id="classic-c", partition_assignment_strategy="range")
    try:
        c.subscribe(["classic-topic"])
        wait_until(lambda: len(c.assignment()) == 2, 30, "the classic consumer's assignment", step=poll_all(c))
        d = wait_until(lambda: (lambda d: d if d.state == ConsumerGroupState.STABLE else None)(
            describe(admin, "g-classic-desc")), 10, "a STABLE description")
        assert d.type == ConsumerGroupType.CLASSIC, d.type
        assert d.partition_assignor == "range"
        assert [m.client_id for m in d.members] == ["classic-c"]
        assert d.members[0].member_id == c.memberid()
        assert sorted(tp.partition for tp in d.members[0].assignment.topic_partitions) == [0, 1]

        # an unknown group: GROUP_ID_NOT_FOUND from ConsumerGroupDescribe, then DescribeGroups v5
        # (before KIP-1043's v6) describes it as a Dead group without error
        unknown = describe(admin, "g-nobody")
        assert unknown.state == ConsumerGroupState.DEAD, unknown.state
        assert unknown.members == []
    finally:
        close_quietly(c)


def test_commit_and_committed_with_member_epochs(cbroker):
    """(c) OffsetCommit v9 / OffsetFetch v9 carry the member id and epoch; commits pass the epoch
    checks before and after a rebalance, and a new member of the group sees them."""
    admin = confluent_admin(cbroker)
    assert confluent_create(admin, "orders", partitions=6) is None
    a = kip848_consumer(cbroker, "g-commit", "commit-a")
    b = kip848_consumer(cbroker, "g-commit", "commit-b")
    c = None
    first = {0: 10, 1: 9, 2: 13, 3: 6, 4: 14, 5: 8}  # the seed's committed positions
    try:
        a.subscribe(["orders"])
        wait_until(lambda: assigned(a) == ALL6, 30, "A owning all six", step=poll_all(a))
        res = a.commit(offsets=[TopicPartition("orders", p, o) for p, o in first.items()], asynchronous=False)
        assert {tp.partition: (tp.offset, tp.error) for tp in res} == {p: (o, None) for p, o in first.items()}
        assert committed(a, "orders", ALL6) == first

        # a second member bumps the epochs; A commits what it still owns with its new epoch
        b.subscribe(["orders"])
        wait_until(lambda: len(assigned(a)) == 3 and len(assigned(b)) == 3, 30, "3 + 3", step=poll_all(a, b))
        mine = assigned(a)
        res = a.commit(offsets=[TopicPartition("orders", p, 100 + p) for p in mine], asynchronous=False)
        assert all(tp.error is None for tp in res), res
        res = b.commit(offsets=[TopicPartition("orders", p, 200 + p) for p in assigned(b)], asynchronous=False)
        assert all(tp.error is None for tp in res), res
        want = {p: (100 + p if p in mine else 200 + p) for p in ALL6}
        assert committed(a, "orders", ALL6) == want
        assert committed(b, "orders", ALL6) == want
    finally:
        close_quietly(a, b)

    # a new consumer in the same group (after both left) sees the committed offsets
    c = kip848_consumer(cbroker, "g-commit", "commit-c")
    try:
        c.subscribe(["orders"])
        wait_until(lambda: assigned(c) == ALL6, 30, "C owning all six", step=poll_all(c))
        assert committed(c, "orders", ALL6) == want
    finally:
        close_quietly(c)


def test_regex_subscription_picks_up_a_topic_created_later(start_broker):
    """(d) librdkafka sends a subscription starting with '^' as SubscribedTopicRegex; the broker
    resolves it, and re-resolves it when a matching topic is created afterwards."""
    broker = start_broker(*FAST_HEARTBEATS)
    admin = confluent_admin(broker)
    assert confluent_create(admin, "orders-a", partitions=3) is None
    assert confluent_create(admin, "payments", partitions=2) is None  # does not match
    c = kip848_consumer(broker, "g-regex", "regex-c", topic_metadata_refresh_interval_ms=1000)
    try:
        c.subscribe(["^orders-.*"])
        wait_until(lambda: assigned_topics(c) == {"orders-a": [0, 1, 2]}, 30, "orders-a[0..2]",
                   step=poll_all(c))

        assert confluent_create(admin, "orders-b", partitions=2) is None
        created = time.monotonic()
        wait_until(lambda: assigned_topics(c) == {"orders-a": [0, 1, 2], "orders-b": [0, 1]}, 30,
                   f"orders-b[0,1] added to the regex subscription (have {assigned_topics(c)})", step=poll_all(c))
        took = time.monotonic() - created
        assert took < 20, took

        d = describe(admin, "g-regex")
        assert d.type == ConsumerGroupType.CONSUMER
        assert len(d.members) == 1
        got = sorted((tp.topic, tp.partition) for tp in d.members[0].assignment.topic_partitions)
        assert got == [("orders-a", 0), ("orders-a", 1), ("orders-a", 2), ("orders-b", 0), ("orders-b", 1)]
    finally:
        close_quietly(c)


def assigned_topics(consumer) -> dict[str, list[int]]:
    out: dict[str, list[int]] = {}
    for tp in consumer.assignment():
        out.setdefault(tp.topic, []).append(tp.partition)
    return {t: sorted(ps) for t, ps in out.items()}


def raw_join_v5(broker, group: str, topic: str) -> tuple[int, str]:
    """A classic JoinGroup v5 (what librdkafka sends) without a member id, as a new member's first
    join: returns (error code, member id)."""
    subscription = struct.pack(">hi", 0, 1) + kstring(topic) + struct.pack(">i", -1)
    body = (kstring(group) + struct.pack(">ii", 10000, 30000) + kstring("") + kstring(None) + kstring("consumer")
            + struct.pack(">i", 1) + kstring("range") + struct.pack(">i", len(subscription)) + subscription)
    with connect(broker.bootstrap, timeout=10) as s:
        s.sendall(request_frame(JOIN_GROUP, 5, 7, body, client_id="raw-classic"))
        r = Reader(recv_frame(s))
    assert r.take(">i") == 7
    r.take(">i")  # throttle
    err = r.take(">h")
    r.take(">i")  # generation
    r.string()  # protocol name
    r.string()  # leader
    member_id = r.string()
    return err, member_id


def test_classic_member_joins_a_consumer_group(cbroker):
    """(e) A KIP-848 group with a live member: a classic consumer joining the same group id becomes
    a member of the consumer group (Kafka's `classicGroupJoinToConsumerGroup`; a raw v5 JoinGroup
    without a member id first gets MEMBER_ID_REQUIRED, as from a classic group): the KIP-848
    member gives up half of the partitions, the classic one gets them through SyncGroup, and the
    group stays a consumer group with both members. Under `group.consumer.migration.policy=disabled`
    the same join is INCONSISTENT_GROUP_PROTOCOL (`throwIfClassicMemberCannotJoinConsumerGroup`)."""
    admin = confluent_admin(cbroker)
    assert confluent_create(admin, "orders", partitions=6) is None
    a = kip848_consumer(cbroker, "g-mixed", "mixed-848")
    classic = None
    try:
        a.subscribe(["orders"])
        wait_until(lambda: assigned(a) == ALL6, 30, "the KIP-848 member owning all six", step=poll_all(a))

        err, member_id = raw_join_v5(cbroker, "g-mixed", "orders")
        assert (err, bool(member_id)) == (MEMBER_ID_REQUIRED, True), (err, member_id)

        classic = Consumer({
            "bootstrap.servers": cbroker.bootstrap, "group.id": "g-mixed", "client.id": "mixed-classic",
            "group.protocol": "classic", "partition.assignment.strategy": "range",
            "session.timeout.ms": 10000, "heartbeat.interval.ms": 1000, "enable.auto.commit": False,
            "logger": logging.getLogger("librdkafka"), "broker.address.family": "v4",
            "socket.timeout.ms": 10000, "reconnect.backoff.max.ms": 1000})
        classic.subscribe(["orders"])
        wait_until(lambda: len(assigned(a)) == 3 and sorted(assigned(a) + assigned(classic)) == ALL6, 30,
                   "the two members sharing the six partitions", step=poll_all(a, classic))
        d = describe(admin, "g-mixed")
        assert d.type == ConsumerGroupType.CONSUMER
        assert sorted(m.client_id for m in d.members) == ["mixed-848", "mixed-classic"]
    finally:
        close_quietly(*(c for c in (classic, a) if c is not None))


def test_classic_join_into_a_consumer_group_with_migration_disabled(start_broker):
    broker = start_broker(*FAST_HEARTBEATS, "group.consumer.migration.policy=disabled")
    admin = confluent_admin(broker)
    assert confluent_create(admin, "orders", partitions=6) is None
    a = kip848_consumer(broker, "g-mixed", "mixed-848")
    try:
        a.subscribe(["orders"])
        wait_until(lambda: assigned(a) == ALL6, 30, "the KIP-848 member owning all six", step=poll_all(a))
        err, _ = raw_join_v5(broker, "g-mixed", "orders")
        assert err == INCONSISTENT_GROUP_PROTOCOL, err
        assert assigned(a) == ALL6
    finally:
        close_quietly(a)


# ------------------------------------------------------------- DescribeGroups on a consumer group
DESCRIBE_GROUPS = 15
GROUP_ID_NOT_FOUND = 69


def _uvarint(n: int) -> bytes:
    out = b""
    while n >= 0x80:
        out += bytes([(n & 0x7F) | 0x80])
        n >>= 7
    return out + bytes([n])


def _read_uvarint(r: Reader) -> int:
    n, shift = 0, 0
    while True:
        b = r.take(">B")
        n |= (b & 0x7F) << shift
        if b < 0x80:
            return n
        shift += 7


def _compact_str(r: Reader) -> str | None:
    n = _read_uvarint(r)
    if n == 0:
        return None
    s = r.data[r.pos:r.pos + n - 1]
    r.pos += n - 1
    return s.decode()


def describe_groups_raw(broker, group: str, version: int) -> dict:
    """DescribeGroups v3 (classic encoding, aiokafka's version) or v6 (flexible) for one group:
    the group's error code, message (v6), state, protocol type and member count."""
    if version >= 5:
        body = _uvarint(2) + _uvarint(len(group) + 1) + group.encode() + b"\x00" + b"\x00"
        payload = struct.pack(">hhi", DESCRIBE_GROUPS, version, 11) + kstring("raw-describe") + b"\x00" + body
        frame = struct.pack(">i", len(payload)) + payload
    else:
        frame = request_frame(DESCRIBE_GROUPS, version, 11, struct.pack(">i", 1) + kstring(group) + b"\x00",
                              client_id="raw-describe")
    with connect(broker.bootstrap, timeout=10) as s:
        s.sendall(frame)
        r = Reader(recv_frame(s))
    assert r.take(">i") == 11
    if version >= 5:
        assert _read_uvarint(r) == 0  # response header tagged fields
        r.take(">i")  # throttle
        assert _read_uvarint(r) == 2  # one group
        out = {"error": r.take(">h"), "message": _compact_str(r) if version >= 6 else None,
               "group": _compact_str(r), "state": _compact_str(r), "protocol_type": _compact_str(r),
               "protocol_data": _compact_str(r), "members": _read_uvarint(r) - 1}
    else:
        r.take(">i")  # throttle
        assert r.take(">i") == 1
        out = {"error": r.take(">h"), "message": None, "group": r.string(), "state": r.string(),
               "protocol_type": r.string(), "protocol_data": r.string(), "members": r.take(">i")}
    return out


def test_describe_groups_on_a_consumer_group_answers_like_kafka(cbroker):
    """DescribeGroups (the classic admin API) only describes classic groups in Kafka 4
    (GroupMetadataManager.describeGroups → classicGroup(..) throws GroupIdNotFoundException
    "Group X is not a classic group."): v0-5 answer state "Dead" with no error and no members,
    v6 answers GROUP_ID_NOT_FOUND with that message (state "Dead"). KIP-848 groups are described
    with ConsumerGroupDescribe instead."""
    admin = confluent_admin(cbroker)
    assert confluent_create(admin, "orders", partitions=2) is None
    a = kip848_consumer(cbroker, "g-848-describe", "describe-848")
    try:
        a.subscribe(["orders"])
        wait_until(lambda: assigned(a) == [0, 1], 30, "the KIP-848 member owning both", step=poll_all(a))
        v3 = describe_groups_raw(cbroker, "g-848-describe", 3)
        v6 = describe_groups_raw(cbroker, "g-848-describe", 6)
        assert (v3["error"], v3["state"], v3["members"]) == (0, "Dead", 0), v3
        assert (v6["error"], v6["message"], v6["state"], v6["members"]) == (
            GROUP_ID_NOT_FOUND, "Group g-848-describe is not a classic group.", "Dead", 0), v6
    finally:
        close_quietly(a)
