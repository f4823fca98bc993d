"""Kafka's own tools against Ringleader, with Apache Kafka 4.4.0 as the reference.

1. kafka-consumer-groups (ConsumerGroupCommand from kafka-tools 4.4.0) runs the same command against Ringleader
   and against the reference broker after the same scenario was built on both with confluent-kafka; exit code,
   stdout and stderr must be equal after `Normaliser` (member ids, topic ids, the broker address, log times).
2. kafka-dump-log --offsets-decoder reads Ringleader's `__consumer_offsets` segments and decodes every record.
3. `ringleader dump-log` prints the reference broker's `__consumer_offsets` segments as kafka-dump-log does.

The scenario (built once per module per xdist worker, identically on both brokers, in the same order, so group
epochs and the `__consumer_offsets` partition of every group compare): topic `orders` (3 partitions, 10 records
each with timestamps T0 + i s); groups

  tools-classic         classic protocol, one live member, committed {0: 3, 1: 5, 2: 7}
  tools-consumer        consumer protocol (KIP-848), one live member, committed {0: 2, 1: 4, 2: 6}
  tools-empty           classic, member closed (Empty), committed {0: 1, 1: 2, 2: 3}
  tools-consumer-empty  consumer protocol, member closed (Empty), committed {0: 4, 1: 0, 2: 9}
  tools-simple          offsets only (AdminClient alterConsumerGroupOffsets), committed {0: 5, 2: 8}
  tools-deleted, tools-consumer-deleted: built like the Empty groups, then deleted (for the dump-log records)

Tests that change groups (--execute, --delete-offsets, --delete) build groups of their own on both brokers, and
come after the read-only ones in this file (each xdist worker runs its share in file order, with its own pair of
brokers). Every comparison of a test is made and all differences are reported together.
"""

from __future__ import annotations

import datetime
import json
import logging
import os
import re
import shutil
import subprocess
import time
from pathlib import Path

import pytest
from confluent_kafka import (ConsumerGroupState, ConsumerGroupTopicPartitions, Consumer, KafkaException, Producer,
                             TopicCollection, TopicPartition)
from confluent_kafka.admin import AdminClient, NewTopic

from harness import Broker, binary_path, broker_env, wait_until
from kafka_ref import (Normaliser, compare_results, consumer_groups, in_parallel, kafka_tool, log_dirs, offsets_partition,
                       offsets_segments, split_dumps, summarise_text_diffs, wait_for_bytes)

pytestmark = pytest.mark.timeout(420)  # fixture set-up (reference broker start) counts; every call is bounded

TOPIC = "orders"
PARTITIONS = 3
RECORDS = 10
T0 = (int(time.time()) - 3600) * 1000  # record i of every partition has CreateTime T0 + i * 1000
TOOL_TIMEOUT_ARGS = ["--timeout", "30000"]  # the tool's own wait (default 5 s), generous on a busy machine
CALL_S = 30.0
MAX_POLL_MS = 1_800_000  # live members are not polled between tests; they must outlive the module

LIVE_CLASSIC, LIVE_CONSUMER = "tools-classic", "tools-consumer"
EMPTY_CLASSIC, EMPTY_CONSUMER, SIMPLE = "tools-empty", "tools-consumer-empty", "tools-simple"
NO_SUCH_GROUP = "tools-no-such-group"
SCENARIO_GROUPS = [LIVE_CLASSIC, LIVE_CONSUMER, EMPTY_CLASSIC, EMPTY_CONSUMER, SIMPLE]
COMMITTED = {
    LIVE_CLASSIC: {0: 3, 1: 5, 2: 7},
    LIVE_CONSUMER: {0: 2, 1: 4, 2: 6},
    EMPTY_CLASSIC: {0: 1, 1: 2, 2: 3},
    EMPTY_CONSUMER: {0: 4, 1: 0, 2: 9},
    SIMPLE: {0: 5, 2: 8},
}


def iso(ms: int) -> str:
    """kafka-consumer-groups --to-datetime format, in UTC."""
    d = datetime.datetime.fromtimestamp(ms / 1000, datetime.timezone.utc)
    return d.strftime("%Y-%m-%dT%H:%M:%S.") + f"{ms % 1000:03d}Z"


# ------------------------------------------------------------------------------------- one broker
class Side:
    """One broker of the comparison with the clients that built its scenario."""

    def __init__(self, name: str, bootstrap: str, data_dir: Path):
        self.name = name
        self.bootstrap = bootstrap
        self.data_dir = Path(data_dir)
        self.norm = Normaliser(bootstrap)
        self.live: list[Consumer] = []
        self.admin = AdminClient(self._conf())

    def _conf(self, **extra) -> dict:
        conf = {"bootstrap.servers": self.bootstrap, "broker.address.family": "v4",
                "logger": logging.getLogger(f"librdkafka.{self.name}"),
                "socket.timeout.ms": 15000, "socket.connection.setup.timeout.ms": 10000,
                "reconnect.backoff.max.ms": 1000}
        conf.update(extra)
        return conf

    # -- building blocks (each bounded)
    def create_topic(self) -> None:
        fs = self.admin.create_topics([NewTopic(TOPIC, num_partitions=PARTITIONS, replication_factor=1)],
                                      request_timeout=30, operation_timeout=20)
        fs[TOPIC].result(timeout=CALL_S)

        def ready():
            md = self.admin.list_topics(TOPIC, timeout=10)
            t = md.topics.get(TOPIC)
            return t is not None and t.error is None and len(t.partitions) == PARTITIONS and all(
                p.leader >= 0 for p in t.partitions.values())
        wait_until(ready, 60, f"{TOPIC} with {PARTITIONS} led partitions on {self.name}", interval=0.2)
        d = self.admin.describe_topics(TopicCollection([TOPIC]), request_timeout=20)[TOPIC].result(timeout=CALL_S)
        self.norm.add(str(d.topic_id), f"<topic-id:{TOPIC}>")

    def produce(self) -> None:
        p = Producer(self._conf(**{"linger.ms": 0, "acks": "all", "message.timeout.ms": 30000}))
        for part in range(PARTITIONS):
            for i in range(RECORDS):
                p.produce(TOPIC, key=b"k%d" % i, value=b"v%d-%d" % (part, i), partition=part, timestamp=T0 + i * 1000)
        assert p.flush(CALL_S) == 0, f"{self.name}: records not acknowledged within {CALL_S}s"

    def consumer(self, group: str, protocol: str) -> Consumer:
        conf = self._conf(**{"group.id": group, "client.id": f"{group}-client", "enable.auto.commit": False,
                             "auto.offset.reset": "earliest", "max.poll.interval.ms": MAX_POLL_MS})
        if protocol == "consumer":
            conf["group.protocol"] = "consumer"
        else:
            conf.update({"session.timeout.ms": 10000, "heartbeat.interval.ms": 1000})
        return Consumer(conf)

    def join_and_commit(self, group: str, protocol: str, offsets: dict[int, int], stay: bool) -> None:
        c = self.consumer(group, protocol)
        c.subscribe([TOPIC])
        wait_until(lambda: len(c.assignment()) == PARTITIONS, 90,
                   f"{group} ({protocol}) member assigned {PARTITIONS} partitions on {self.name}",
                   step=lambda: c.poll(0.1))
        c.commit(offsets=[TopicPartition(TOPIC, p, o) for p, o in offsets.items()], asynchronous=False)
        self.norm.add(c.memberid(), f"<member:{group}>")
        if stay:
            self.live.append(c)
        else:
            c.close()

    def alter_offsets(self, group: str, offsets: dict[int, int]) -> None:
        req = ConsumerGroupTopicPartitions(group, [TopicPartition(TOPIC, p, o) for p, o in offsets.items()])
        res = self.admin.alter_consumer_group_offsets([req], request_timeout=20)[group].result(timeout=CALL_S)
        assert all(tp.error is None for tp in res.topic_partitions), res

    def delete_groups(self, *groups: str) -> None:
        for g, f in self.admin.delete_consumer_groups(list(groups), request_timeout=20).items():
            f.result(timeout=CALL_S)

    def state(self, group: str):
        try:
            return self.admin.describe_consumer_groups([group], request_timeout=15)[group].result(timeout=CALL_S).state
        except KafkaException:
            return None

    def wait_state(self, group: str, state) -> None:
        wait_until(lambda: self.state(group) == state, 60, f"{group} {state} on {self.name}", interval=0.2)

    def committed(self, group: str) -> dict[int, int]:
        req = ConsumerGroupTopicPartitions(group, [TopicPartition(TOPIC, p) for p in range(PARTITIONS)])
        res = self.admin.list_consumer_group_offsets([req], request_timeout=20)[group].result(timeout=CALL_S)
        return {tp.partition: tp.offset for tp in res.topic_partitions if tp.offset >= 0}

    def close(self) -> None:
        for c in self.live:
            try:
                c.close()
            except (RuntimeError, KafkaException):
                pass
        self.live.clear()


def build_group(side: Side, group: str, kind: str, offsets: dict[int, int]) -> None:
    """kind: live-classic, live-consumer, empty-classic, empty-consumer, simple."""
    if kind == "simple":
        side.alter_offsets(group, offsets)
        return
    stay, protocol = kind.split("-")
    side.join_and_commit(group, protocol, offsets, stay=(stay == "live"))


def wait_settled(side: Side, groups: dict[str, str]) -> None:
    for g, kind in groups.items():
        side.wait_state(g, ConsumerGroupState.STABLE if kind.startswith("live") else ConsumerGroupState.EMPTY)


def build_scenario(side: Side) -> None:
    side.create_topic()
    side.produce()
    kinds = {LIVE_CLASSIC: "live-classic", LIVE_CONSUMER: "live-consumer", EMPTY_CLASSIC: "empty-classic",
             EMPTY_CONSUMER: "empty-consumer", SIMPLE: "simple"}
    for g, kind in kinds.items():
        build_group(side, g, kind, COMMITTED[g])
    # groups that exist only as records (and tombstones) in __consumer_offsets
    build_group(side, "tools-deleted", "empty-classic", {0: 1})
    build_group(side, "tools-consumer-deleted", "empty-consumer", {1: 2})
    side.wait_state("tools-consumer-deleted", ConsumerGroupState.EMPTY)
    side.delete_groups("tools-deleted", "tools-consumer-deleted")
    wait_settled(side, kinds)


# ------------------------------------------------------------------------------------------ fixtures
@pytest.fixture(scope="module")
def ringleader(tmp_path_factory):
    d = tmp_path_factory.mktemp("ringleader-tools")
    b = Broker(data_dir=d / "data", log_path=d / "ringleader.log", sets=["group.initial.rebalance.delay.ms=0"])
    b.start()
    yield b
    b.kill()


@pytest.fixture(scope="module")
def sides(kafka_ref, ringleader):
    kafka = Side("kafka", kafka_ref.bootstrap, kafka_ref.data_dir)
    rl = Side("ringleader", ringleader.bootstrap, ringleader.data_dir)
    try:
        for s in (kafka, rl):
            build_scenario(s)
        yield kafka, rl
    finally:
        for s in (kafka, rl):
            s.close()


class Diffs:
    """Collects the comparisons of one test; fails once at the end with every difference."""

    def __init__(self, kafka: Side, rl: Side):
        self.kafka, self.rl = kafka, rl
        self.failures: list[str] = []
        self.runs = 0

    def tool(self, label: str, *args: str):
        """Run kafka-consumer-groups ARGS against both brokers (in parallel) and compare."""
        k, r = in_parallel(lambda: consumer_groups(self.kafka.bootstrap, *args, *TOOL_TIMEOUT_ARGS),
                           lambda: consumer_groups(self.rl.bootstrap, *args, *TOOL_TIMEOUT_ARGS))
        self.runs += 1
        report = compare_results(label, k, r, self.kafka.norm, self.rl.norm)
        if report:
            self.failures.append(report)
        return k, r

    def equal(self, label: str, kafka_value, rl_value) -> None:
        if kafka_value != rl_value:
            self.failures.append(f"=== {label}\n  kafka:      {kafka_value!r}\n  ringleader: {rl_value!r}")

    def check(self) -> None:
        if self.failures:
            pytest.fail(f"{len(self.failures)} difference(s) between Kafka 4.4.0 and Ringleader:\n\n"
                        + "\n\n".join(self.failures), pytrace=False)


def sanity(k, expect_in_stdout: list[str] = (), rc: int = 0) -> None:
    """What the reference itself must print: guards against comparing two equally broken runs."""
    assert k.rc == rc, f"the reference run itself failed:\n{k}"
    for s in expect_in_stdout:
        assert s in k.stdout + k.stderr, f"the reference run does not print {s!r}:\n{k}"


# ---------------------------------------------------------------------------- read-only commands
G_ALL = [a for g in SCENARIO_GROUPS for a in ("--group", g)]
MID = iso(T0 + 4500)        # first record at or after: offset 5
BEFORE = iso(T0 - 60_000)   # before every record: offset 0
AFTER = iso(T0 + 3_600_000)  # after every record: the log end, 10

READ_ONLY = {
    # --list
    "list": (["--list"], [LIVE_CLASSIC, SIMPLE]),
    "list-state": (["--list", "--state"], ["STATE", "Stable", "Empty"]),
    "list-type": (["--list", "--type"], ["TYPE", "Classic", "Consumer"]),
    "list-type-state": (["--list", "--type", "--state"], ["TYPE", "STATE"]),
    "list-state-filter": (["--list", "--state", "Stable"], [LIVE_CONSUMER]),
    "list-type-filter": (["--list", "--type", "consumer", "--state", "Empty"], [EMPTY_CONSUMER]),
    # --describe
    "describe-default": (["--describe", *G_ALL], ["CURRENT-OFFSET"]),
    "describe-offsets": (["--describe", *G_ALL, "--offsets"], ["LOG-END-OFFSET"]),
    "describe-offsets-verbose": (["--describe", *G_ALL, "--offsets", "--verbose"], ["LEADER-EPOCH"]),
    "describe-members": (["--describe", *G_ALL, "--members"], ["#PARTITIONS"]),
    "describe-members-verbose": (["--describe", *G_ALL, "--members", "--verbose"], ["TARGET-ASSIGNMENT"]),
    "describe-state": (["--describe", *G_ALL, "--state"], ["ASSIGNMENT-STRATEGY"]),
    "describe-state-verbose": (["--describe", *G_ALL, "--state", "--verbose"], ["GROUP-EPOCH"]),
    "describe-unknown-group": (["--describe", "--group", NO_SUCH_GROUP], ["not found"]),
    # --reset-offsets --dry-run on an Empty group (the broker's ListOffsets answers and committed offsets)
    "reset-dry-run-to-earliest": (["--reset-offsets", "--group", EMPTY_CLASSIC, "--all-topics", "--to-earliest",
                                   "--dry-run"], ["NEW-OFFSET"]),
    "reset-dry-run-to-latest": (["--reset-offsets", "--group", EMPTY_CLASSIC, "--topic", TOPIC, "--to-latest",
                                 "--dry-run"], ["NEW-OFFSET"]),
    "reset-dry-run-to-datetime": (["--reset-offsets", "--group", EMPTY_CLASSIC, "--topic", f"{TOPIC}:0,2",
                                   "--to-datetime", MID, "--dry-run"], ["NEW-OFFSET"]),
    "reset-dry-run-to-datetime-before": (["--reset-offsets", "--group", EMPTY_CLASSIC, "--all-topics",
                                          "--to-datetime", BEFORE, "--dry-run"], ["NEW-OFFSET"]),
    "reset-dry-run-to-datetime-after": (["--reset-offsets", "--group", EMPTY_CLASSIC, "--all-topics",
                                         "--to-datetime", AFTER, "--dry-run"], ["NEW-OFFSET"]),
    "reset-dry-run-shift-by": (["--reset-offsets", "--group", EMPTY_CLASSIC, "--all-topics", "--shift-by", "2",
                                "--dry-run"], ["NEW-OFFSET"]),
    "reset-dry-run-shift-by-below-earliest": (["--reset-offsets", "--group", EMPTY_CLASSIC, "--all-topics",
                                               "--shift-by", "-5", "--dry-run"], ["lower than earliest"]),
    "reset-dry-run-to-offset": (["--reset-offsets", "--group", EMPTY_CLASSIC, "--topic", f"{TOPIC}:1",
                                 "--to-offset", "6", "--dry-run"], ["NEW-OFFSET"]),
    "reset-dry-run-to-offset-beyond-end": (["--reset-offsets", "--group", EMPTY_CLASSIC, "--all-topics",
                                            "--to-offset", "50", "--dry-run"], ["higher than latest"]),
    "reset-dry-run-consumer-group": (["--reset-offsets", "--group", EMPTY_CONSUMER, "--all-topics", "--shift-by",
                                      "-1", "--dry-run"], ["NEW-OFFSET"]),
    "reset-dry-run-simple-group": (["--reset-offsets", "--group", SIMPLE, "--all-topics", "--to-latest",
                                    "--dry-run"], ["NEW-OFFSET"]),
    "reset-dry-run-unknown-group": (["--reset-offsets", "--group", NO_SUCH_GROUP, "--topic", TOPIC,
                                     "--to-earliest", "--dry-run"], ["NEW-OFFSET"]),
    "reset-without-dry-run-or-execute": (["--reset-offsets", "--group", EMPTY_CLASSIC, "--all-topics",
                                          "--to-earliest"], ["--execute option is missing"]),
    "reset-dry-run-refused-live-classic": (["--reset-offsets", "--group", LIVE_CLASSIC, "--all-topics",
                                            "--to-earliest", "--dry-run"], ["can only be reset if the group"]),
}


@pytest.mark.parametrize("case", list(READ_ONLY))
def test_consumer_groups_read_only(sides, case):
    kafka, rl = sides
    args, expect = READ_ONLY[case]
    d = Diffs(kafka, rl)
    k, _ = d.tool(case, *args)
    sanity(k, expect)
    d.check()


def test_kafka_log_dirs_describes_the_same_logs(sides):
    """DescribeLogDirs through kafka-log-dirs: one broker with one absolute log directory that exists, no error, the
    same partition logs on both brokers (`orders`' three and the offsets topic's), none a future log nor lagging;
    the topic's logs hold the scenario's records (each above the empty log's 0 bytes). Sizes are not compared:
    the producer's batching on each broker decides them."""
    kafka, rl = sides
    got = {}
    for side in (kafka, rl):
        out = log_dirs(side.bootstrap, "--topic-list", f"{TOPIC},__consumer_offsets")
        assert out["version"] == 1, out
        (broker,) = out["brokers"]
        (d,) = broker["logDirs"]
        assert d["error"] is None, (side.name, d)
        assert os.path.isabs(d["logDir"]) and os.path.isdir(d["logDir"]), (side.name, d["logDir"])
        parts = {p["partition"]: p for p in d["partitions"]}
        assert all(p["offsetLag"] == 0 and p["isFuture"] is False for p in parts.values()), (side.name, parts)
        assert all(parts[f"{TOPIC}-{i}"]["size"] > 0 for i in range(PARTITIONS)), (side.name, parts)
        got[side.name] = sorted(parts)
    assert got["ringleader"] == got["kafka"], got
    assert len([p for p in got["kafka"] if p.startswith("__consumer_offsets-")]) > 0, got


# ---------------------------------------------------------------------------- commands that change
def test_reset_offsets_refused_while_members_are_live(sides):
    """--execute on a group with a live member (classic and consumer protocol) is refused by the tool after
    DescribeGroups / ConsumerGroupDescribe report a non-Empty state; nothing is committed."""
    kafka, rl = sides
    d = Diffs(kafka, rl)
    for g in (LIVE_CLASSIC, LIVE_CONSUMER):
        k, _ = d.tool(f"reset-execute-refused {g}", "--reset-offsets", "--group", g, "--all-topics",
                      "--to-earliest", "--execute")
        sanity(k, ["can only be reset if the group", "Stable"])
    for g in (LIVE_CLASSIC, LIVE_CONSUMER):
        assert kafka.committed(g) == COMMITTED[g]
        d.equal(f"committed offsets of {g} after the refused resets", kafka.committed(g), rl.committed(g))
    d.check()


def test_reset_offsets_execute(sides):
    """--execute on Empty groups of both protocols and on a group that does not exist yet; after each step the
    tool's output and the committed offsets (OffsetFetch through confluent-kafka) compare."""
    kafka, rl = sides
    for s in (kafka, rl):
        build_group(s, "tools-reset", "empty-classic", {0: 1, 1: 2, 2: 3})
        build_group(s, "tools-reset-consumer", "empty-consumer", {0: 7, 1: 7, 2: 7})
        wait_settled(s, {"tools-reset": "empty-classic", "tools-reset-consumer": "empty-consumer"})
    d = Diffs(kafka, rl)
    steps = [
        ("tools-reset", ["--all-topics", "--to-earliest"], {0: 0, 1: 0, 2: 0}),
        ("tools-reset", ["--topic", TOPIC, "--to-latest"], {0: 10, 1: 10, 2: 10}),
        ("tools-reset", ["--topic", f"{TOPIC}:0,2", "--to-datetime", MID], {0: 5, 1: 10, 2: 5}),
        ("tools-reset", ["--all-topics", "--shift-by", "-3"], {0: 2, 1: 7, 2: 2}),
        ("tools-reset", ["--topic", f"{TOPIC}:1", "--to-offset", "4"], {0: 2, 1: 4, 2: 2}),
        ("tools-reset", ["--all-topics", "--shift-by", "20"], {0: 10, 1: 10, 2: 10}),
        ("tools-reset-consumer", ["--all-topics", "--to-offset", "3"], {0: 3, 1: 3, 2: 3}),
        ("tools-reset-consumer", ["--topic", f"{TOPIC}:2", "--to-datetime", BEFORE], {0: 3, 1: 3, 2: 0}),
        ("tools-reset-new", ["--topic", TOPIC, "--to-offset", "2"], {0: 2, 1: 2, 2: 2}),
    ]
    for g, scenario, expected in steps:
        label = f"reset --execute {g} {' '.join(scenario)}"
        k, _ = d.tool(label, "--reset-offsets", "--group", g, *scenario, "--execute")
        sanity(k, ["NEW-OFFSET"])
        assert kafka.committed(g) == expected, (label, kafka.committed(g))
        d.equal(f"committed offsets of {g} after: {label}", kafka.committed(g), rl.committed(g))
    groups = [a for g in ("tools-reset", "tools-reset-consumer", "tools-reset-new") for a in ("--group", g)]
    k, _ = d.tool("describe the reset groups", "--describe", *groups, "--offsets")
    sanity(k, ["has no active members", "tools-reset-new"])
    k, _ = d.tool("describe --state of the reset groups", "--describe", *groups, "--state", "--verbose")
    sanity(k, ["Empty", "tools-reset-new"])
    d.check()


def test_delete_offsets(sides):
    kafka, rl = sides
    for s in (kafka, rl):
        build_group(s, "tools-deloffs", "empty-classic", {0: 1, 1: 2, 2: 3})
        build_group(s, "tools-deloffs-consumer", "empty-consumer", {0: 4, 1: 5, 2: 6})
        wait_settled(s, {"tools-deloffs": "empty-classic", "tools-deloffs-consumer": "empty-consumer"})
    d = Diffs(kafka, rl)
    k, _ = d.tool("delete-offsets one partition", "--delete-offsets", "--group", "tools-deloffs",
                  "--topic", f"{TOPIC}:1")
    sanity(k, ["Request succeeded", "Successful"])
    d.equal("committed offsets of tools-deloffs", kafka.committed("tools-deloffs"), rl.committed("tools-deloffs"))
    k, _ = d.tool("describe after delete-offsets", "--describe", "--group", "tools-deloffs", "--offsets")
    sanity(k, ["has no active members"])
    k, _ = d.tool("delete-offsets of a consumer-protocol Empty group", "--delete-offsets", "--group",
                  "tools-deloffs-consumer", "--topic", f"{TOPIC}:0,2")
    sanity(k, ["Request succeeded"])
    d.equal("committed offsets of tools-deloffs-consumer", kafka.committed("tools-deloffs-consumer"),
            rl.committed("tools-deloffs-consumer"))
    k, _ = d.tool("delete-offsets: live classic group subscribed to the topic", "--delete-offsets", "--group",
                  LIVE_CLASSIC, "--topic", TOPIC)
    sanity(k, ["GroupSubscribedToTopicException"])
    k, _ = d.tool("delete-offsets: live consumer-protocol group subscribed to the topic", "--delete-offsets",
                  "--group", LIVE_CONSUMER, "--topic", f"{TOPIC}:0")
    sanity(k, ["GroupSubscribedToTopicException"])
    k, _ = d.tool("delete-offsets: unknown group", "--delete-offsets", "--group", NO_SUCH_GROUP, "--topic", TOPIC)
    sanity(k, ["GroupIdNotFoundException"])
    k, _ = d.tool("delete-offsets: unknown topic", "--delete-offsets", "--group", "tools-deloffs",
                  "--topic", "tools-no-such-topic")
    sanity(k, ["UnknownTopicOrPartitionException"])
    k, _ = d.tool("delete-offsets: all of the topic", "--delete-offsets", "--group", "tools-deloffs",
                  "--topic", TOPIC)
    sanity(k, ["Request succeeded"])
    d.equal("committed offsets of tools-deloffs after deleting all", kafka.committed("tools-deloffs"),
            rl.committed("tools-deloffs"))
    k, _ = d.tool("describe a group without offsets", "--describe", "--group", "tools-deloffs", "--state")
    sanity(k)
    for g in (LIVE_CLASSIC, LIVE_CONSUMER):
        d.equal(f"committed offsets of {g}", kafka.committed(g), rl.committed(g))
    d.check()


def test_delete_groups(sides):
    kafka, rl = sides
    for s in (kafka, rl):
        build_group(s, "tools-del-a", "empty-classic", {0: 1})
        build_group(s, "tools-del-b", "empty-consumer", {1: 1})
        build_group(s, "tools-del-c", "simple", {2: 1})
        build_group(s, "tools-del-d", "empty-classic", {0: 2})
        wait_settled(s, {"tools-del-a": "empty-classic", "tools-del-b": "empty-consumer",
                         "tools-del-d": "empty-classic"})
    d = Diffs(kafka, rl)
    k, _ = d.tool("delete three Empty groups", "--delete", "--group", "tools-del-a", "--group", "tools-del-b",
                  "--group", "tools-del-c")
    sanity(k, ["was successful"])
    k, _ = d.tool("delete a live classic group", "--delete", "--group", LIVE_CLASSIC)
    sanity(k, ["GroupNotEmptyException"])
    k, _ = d.tool("delete a live consumer-protocol group", "--delete", "--group", LIVE_CONSUMER)
    sanity(k, ["GroupNotEmptyException"])
    k, _ = d.tool("delete an unknown group", "--delete", "--group", NO_SUCH_GROUP)
    sanity(k, ["GroupIdNotFoundException"])
    k, _ = d.tool("delete a deleted group and an Empty one", "--delete", "--group", "tools-del-a",
                  "--group", "tools-del-d")
    sanity(k, ["tools-del-a", "These consumer groups were deleted successfully"])
    for g in ("tools-del-b", "tools-del-d"):
        k, _ = d.tool(f"describe deleted {g}", "--describe", "--group", g, "--state")
        sanity(k, ["not found"])
    k, _ = d.tool("list after the deletes", "--list", "--state", "--type")
    sanity(k, [LIVE_CLASSIC])
    assert "tools-del-" not in k.stdout, k
    d.check()


# ------------------------------------------------------------- `ringleader groups` against Kafka's own tool
def ringleader_groups(bootstrap: str, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([str(binary_path()), "groups", "--bootstrap", bootstrap, "--timeout-ms", "30000", *args],
                          capture_output=True, text=True, timeout=CALL_S * 2)


def _rows_sorted(text: str) -> list[str]:
    """kafka-consumer-groups prints --reset-offsets rows in HashMap order: sort each block of rows under a
    table header (the header and everything else stay in place)."""
    out: list[str] = []
    block: list[str] | None = None
    for line in text.split("\n"):
        if block is not None and line and not line.startswith(("Error:", "Warn:")):
            block.append(line)
            continue
        if block is not None:
            out.extend(sorted(block))
            block = None
        out.append(line)
        if line.startswith(("GROUP ", "TOPIC ")):
            block = []
    if block is not None:
        out.extend(sorted(block))
    return out


def test_ringleader_groups_reset_and_delete_offsets_print_what_kafka_prints(sides):
    """`ringleader groups --reset-offsets` (dry runs) and `--delete-offsets` (cases that change nothing) print
    what kafka-consumer-groups prints, both run against the reference broker itself (same broker, same state).
    Stdout only: Ringleader exits 1 where Kafka prints an error and exits 0, as its --delete does."""
    kafka, _ = sides
    failures = []
    cases = [
        ("--reset-offsets", "--group", EMPTY_CLASSIC, "--all-topics", "--to-earliest"),
        ("--reset-offsets", "--group", EMPTY_CLASSIC, "--all-topics", "--to-latest", "--dry-run"),
        ("--reset-offsets", "--group", EMPTY_CLASSIC, "--all-topics", "--to-current"),
        ("--reset-offsets", "--group", EMPTY_CLASSIC, "--all-topics", "--to-offset", "4"),
        ("--reset-offsets", "--group", EMPTY_CLASSIC, "--all-topics", "--to-offset", "40"),
        ("--reset-offsets", "--group", EMPTY_CLASSIC, "--all-topics", "--shift-by", "-2"),
        ("--reset-offsets", "--group", EMPTY_CLASSIC, "--topic", f"{TOPIC}:0,2", "--shift-by", "8"),
        ("--reset-offsets", "--group", EMPTY_CLASSIC, "--topic", TOPIC, "--to-datetime", MID),
        ("--reset-offsets", "--group", EMPTY_CLASSIC, "--topic", TOPIC, "--to-datetime", BEFORE),
        ("--reset-offsets", "--group", SIMPLE, "--all-topics", "--by-duration", "P1D"),
        ("--reset-offsets", "--group", SIMPLE, "--topic", f"{TOPIC}:1", "--to-current"),
        ("--reset-offsets", "--group", NO_SUCH_GROUP, "--topic", TOPIC, "--to-offset", "3"),
        ("--reset-offsets", "--group", LIVE_CLASSIC, "--all-topics", "--to-earliest", "--execute"),
        ("--reset-offsets", "--group", LIVE_CONSUMER, "--all-topics", "--to-earliest", "--execute"),
        ("--delete-offsets", "--group", LIVE_CLASSIC, "--topic", TOPIC),
        ("--delete-offsets", "--group", LIVE_CONSUMER, "--topic", f"{TOPIC}:0"),
        ("--delete-offsets", "--group", NO_SUCH_GROUP, "--topic", f"{TOPIC}:1"),
    ]
    for args in cases:
        k = consumer_groups(kafka.bootstrap, *args, *TOOL_TIMEOUT_ARGS)
        r = ringleader_groups(kafka.bootstrap, *args)
        sanity(k)
        if _rows_sorted(k.stdout) != _rows_sorted(r.stdout):
            failures.append(f"=== {' '.join(args)}\n--- kafka-consumer-groups:\n{k.stdout}\n"
                            f"--- ringleader groups (exit {r.returncode}):\n{r.stdout}{r.stderr}")
    for g in (LIVE_CLASSIC, LIVE_CONSUMER, EMPTY_CLASSIC, SIMPLE):
        assert kafka.committed(g) == COMMITTED[g], g
    assert not failures, f"{len(failures)} difference(s):\n\n" + "\n\n".join(failures)


# ----------------------------------------------------------------------------------------- dump-log
def ringleader_dump(path: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([str(binary_path()), "dump-log", *args, str(path)], capture_output=True, text=True,
                          timeout=60, stdin=subprocess.DEVNULL, env=broker_env())


@pytest.fixture(scope="module")
def dumps(sides, tmp_path_factory):
    """Copies of both brokers' `__consumer_offsets` segments (so both tools read the same bytes) and
    kafka-dump-log --offsets-decoder of each set, one tool run per broker."""
    kafka, rl = sides
    # Kafka appends to its segment files asynchronously to the responses the clients saw: wait for the
    # records of every scenario group (bounded) before copying.
    for g in SCENARIO_GROUPS + ["tools-deleted", "tools-consumer-deleted"]:
        seg = kafka.data_dir / f"__consumer_offsets-{offsets_partition(g)}" / "00000000000000000000.log"
        wait_for_bytes(seg, [g.encode()], timeout=60)
    out = {}
    for side in (kafka, rl):
        root = tmp_path_factory.mktemp(f"segments-{side.name}")
        copies = []
        for seg in offsets_segments(side.data_dir):
            dst = root / seg.parent.name / seg.name
            dst.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(seg, dst)
            copies.append(dst)
        assert copies, f"no __consumer_offsets segments under {side.data_dir}"
        res = kafka_tool("dump-log", "--offsets-decoder", "--files", ",".join(map(str, copies)))
        out[side.name] = (copies, res)
    return out


_RECORD = re.compile(r"^\| offset: (\d+) .*? key: (.*?) payload: (.*)$")
_BATCH = re.compile(r"^baseOffset: (\d+) lastOffset: (\d+) count: (\d+) .* isvalid: (\w+)")


def decoded_records(section: str) -> tuple[int, int, list[tuple[dict, dict | None]], list[str]]:
    """(sum of the batches' counts, number of record lines, [(key json, value json | None for <DELETE>)],
    problems) of one file's kafka-dump-log section."""
    total, lines, records, problems = 0, 0, [], []
    for ln in section.splitlines():
        m = _BATCH.match(ln)
        if m:
            total += int(m.group(3))
            if m.group(4) != "true":
                problems.append(f"invalid batch: {ln}")
            continue
        if ln.startswith("| offset:"):
            lines += 1
            m = _RECORD.match(ln)
            if not m:
                problems.append(f"record not decoded: {ln}")
                continue
            try:
                key = json.loads(m.group(2))
                value = None if m.group(3) == "<DELETE>" else json.loads(m.group(3))
            except ValueError:
                problems.append(f"record key/payload is not JSON: {ln}")
                continue
            records.append((key, value))
            continue
        if ln.startswith(("Dumping ", "Log starting offset")) or not ln.strip():
            continue
        problems.append(f"unexpected line: {ln}")
    return total, lines, records, problems


def test_kafka_dump_log_decodes_ringleader_segments(dumps):
    copies, res = dumps["ringleader"]
    assert res.rc == 0, str(res)
    assert "Exception" not in res.stdout + res.stderr, str(res)
    sections = split_dumps(res.stdout)
    problems = []
    seen_types = set()
    for seg in copies:
        section = sections.get(str(seg))
        if section is None:
            problems.append(f"{seg}: not dumped")
            continue
        total, lines, records, bad = decoded_records(section)
        problems += [f"{seg.parent.name}/{seg.name}: {p}" for p in bad]
        if total != lines:
            problems.append(f"{seg}: the batches count {total} records, {lines} are printed")
        verify = ringleader_dump(seg, "--verify")
        m = re.search(r"OK: (\d+) batches, (\d+) records", verify.stdout)
        if verify.returncode != 0 or not m:
            problems.append(f"{seg}: ringleader dump-log --verify: {verify.stdout}{verify.stderr}")
        elif int(m.group(2)) != len(records):
            problems.append(f"{seg}: ringleader dump-log --verify counts {m.group(2)} records, "
                            f"kafka-dump-log decoded {len(records)}")
        for key, value in records:
            seen_types.add(key.get("type"))
            if not isinstance(key.get("data"), dict):
                problems.append(f"{seg}: key without data: {key}")
            if value is None:
                continue
            data = value.get("data")
            if not isinstance(data, dict) or "version" not in value:
                problems.append(f"{seg}: value without version/data: {value}")
                continue
            if key.get("type") == "2" and data.get("protocolType") == "consumer":
                for m_ in data.get("members", []):
                    for field in ("subscription", "assignment"):
                        if not isinstance(m_.get(field), dict):  # the tool leaves undecodable bytes as base64
                            problems.append(f"{seg}: {field} of {m_.get('memberId')} not decoded: {m_.get(field)!r}")
    # the scenario writes offset commits (1), classic group metadata (2) and the consumer-protocol records
    # (3 group epoch, 5 member metadata, 6 target assignment metadata, 7 target member assignment,
    # 8 current member assignment)
    missing = {"1", "2", "3", "5", "6", "7", "8"} - seen_types
    if missing:
        problems.append(f"record types never seen in Ringleader's segments: {sorted(missing)}")
    assert not problems, "kafka-dump-log --offsets-decoder on Ringleader's segments:\n" + "\n".join(problems)


def test_ringleader_dump_log_matches_kafka_dump_log_on_kafka_segments(dumps):
    """`ringleader dump-log FILE` and `kafka-dump-log --offsets-decoder --files FILE` on the same copy of each
    of the reference broker's segments print the same text (nothing is normalised: same bytes, same path)."""
    copies, res = dumps["kafka"]
    assert res.rc == 0, str(res)
    sections = split_dumps(res.stdout)
    pairs, errors = [], []
    for seg in copies:
        ours = ringleader_dump(seg)
        theirs = sections.get(str(seg), "")
        assert theirs, f"kafka-dump-log printed nothing for {seg}:\n{res}"
        name = f"{seg.parent.name}/{seg.name}"
        if ours.returncode != 0 or ours.stderr.strip():
            errors.append(f"{name}: ringleader dump-log exit {ours.returncode}, stderr: {ours.stderr.strip()}")
        if ours.stdout.rstrip("\n") != theirs.rstrip("\n"):
            pairs.append((name, theirs.rstrip("\n"), ours.stdout.rstrip("\n")))
    if pairs or errors:
        pytest.fail(f"{len(pairs)} of {len(copies)} segment dumps differ (kafka-dump-log --offsets-decoder vs "
                    f"ringleader dump-log on the same file):\n" + "".join(e + "\n" for e in errors)
                    + summarise_text_diffs(pairs, "kafka-dump-log", "ringleader dump-log"), pytrace=False)


def _group_partitions(copies, res) -> dict[str, set[int]]:
    out: dict[str, set[int]] = {}
    sections = split_dumps(res.stdout)
    for seg in copies:
        _, _, records, _ = decoded_records(sections.get(str(seg), ""))
        p = int(seg.parent.name.rsplit("-", 1)[1])
        for key, _ in records:
            g = key.get("data", {}).get("group") or key.get("data", {}).get("groupId")
            if g and g.startswith("tools-"):
                out.setdefault(g, set()).add(p)
    return out


def test_groups_live_in_the_same_offsets_partitions(dumps):
    """Every group's records are in __consumer_offsets-<abs(hashCode) % 50> on both brokers."""
    kafka = _group_partitions(*dumps["kafka"])
    rl = _group_partitions(*dumps["ringleader"])
    for g in SCENARIO_GROUPS:
        assert kafka.get(g) == {offsets_partition(g)}, (g, kafka.get(g))
    common = sorted(set(kafka) & set(rl))
    assert set(SCENARIO_GROUPS) <= set(common), (sorted(kafka), sorted(rl))
    assert {g: rl[g] for g in common} == {g: kafka[g] for g in common}


# ------------------------------------------------------------------ kafka-configs on a group resource
def test_kafka_configs_on_group_configs_prints_what_kafka_prints(sides):
    """KIP-848 group configs through Kafka 4.4's own kafka-configs: alter (in and out of the
    broker's bounds, unknown keys, bad values, session not above heartbeat), describe, delete —
    the same output from both brokers. `--describe --all` is compared on the consumer-group keys:
    Kafka also lists its share- and streams-group keys, which this broker refuses (it serves
    neither kind of group)."""
    kafka, rl = sides
    d = Diffs(kafka, rl)

    def configs(label: str, *args: str, only_consumer_keys: bool = False):
        run = lambda b: kafka_tool("configs", "--bootstrap-server", b, "--entity-type", "groups",  # noqa: E731
                                   "--entity-name", "tools-gcfg", *args)
        k, r = in_parallel(lambda: run(kafka.bootstrap), lambda: run(rl.bootstrap))
        if only_consumer_keys:
            keep = lambda t: "\n".join(ln for ln in t.splitlines()  # noqa: E731
                                       if not ln.strip().startswith(("share.", "streams.", "errors.")))
            k.stdout, r.stdout = keep(k.stdout), keep(r.stdout)
        d.runs += 1
        report = compare_results(label, k, r, kafka.norm, rl.norm)
        if report:
            d.failures.append(report)
        return k

    sanity(configs("describe all, nothing set", "--describe", "--all", only_consumer_keys=True),
           ["consumer.session.timeout.ms=45000"])
    sanity(configs("set the session timeout", "--alter", "--add-config", "consumer.session.timeout.ms=50000"),
           ["Completed updating config"])
    sanity(configs("describe the override", "--describe"), ["DYNAMIC_GROUP_CONFIG:consumer.session.timeout.ms=50000"])
    k = configs("below the broker's minimum", "--alter", "--add-config", "consumer.session.timeout.ms=5000")
    sanity(k, ["must be in the range 45000 to 60000 inclusive"], rc=k.rc)
    assert k.rc != 0, k
    for label, value in (("an unknown key", "foo.bar=1"), ("not a number", "consumer.session.timeout.ms=abc"),
                         ("heartbeat above the broker's maximum", "consumer.heartbeat.interval.ms=20000"),
                         ("assignment interval above the maximum", "consumer.assignment.interval.ms=16000")):
        k = configs(label, "--alter", "--add-config", value)
        assert k.rc != 0, k
    sanity(configs("two keys at once", "--alter", "--add-config",
                   "consumer.heartbeat.interval.ms=6000,consumer.session.timeout.ms=46000"),
           ["Completed updating config"])
    sanity(configs("describe both", "--describe"), ["consumer.heartbeat.interval.ms=6000"])
    sanity(configs("delete one", "--alter", "--delete-config", "consumer.session.timeout.ms"),
           ["Completed updating config"])
    sanity(configs("describe all after the delete", "--describe", "--all", only_consumer_keys=True),
           ["consumer.session.timeout.ms=45000", "consumer.heartbeat.interval.ms=6000"])
    sanity(configs("delete the other", "--alter", "--delete-config", "consumer.heartbeat.interval.ms"),
           ["Completed updating config"])
    d.check()


# ------------------------------------------------------------------------------------- kafka-acls
# Kafka's own kafka-acls (org.apache.kafka.tools.AclCommand 4.4.0) against a broker with the StandardAuthorizer:
# the authorizer settings of the security tests (scripts/security-config.sh), given to either broker the same way
# (`--set key=value`). The tool connects over PLAINTEXT as User:ANONYMOUS, a super user.
ACL_SETS = ["authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer",
            "super.users=User:ANONYMOUS"]
ACL_ADD_ALICE = ["--add", "--allow-principal", "User:alice", "--operation", "Read", "--operation", "Describe",
                 "--topic", "orders"]
ACL_PRODUCER_BOB = ["--producer", "--topic", "payments", "--allow-principal", "User:bob", "--transactional-id", "tx-",
                    "--resource-pattern-type", "prefixed"]
_ACL_ORDERS = "ResourcePattern(resourceType=TOPIC, name=orders, patternType=LITERAL)"
_ACL_PAYMENTS = "ResourcePattern(resourceType=TOPIC, name=payments, patternType=PREFIXED)"
_ACL_TX = "ResourcePattern(resourceType=TRANSACTIONAL_ID, name=tx-, patternType=PREFIXED)"


def _acl(principal: str, op: str) -> str:
    return f"(principal={principal}, host=*, operation={op}, permissionType=ALLOW)"


ALICE_ORDERS = [_acl("User:alice", "DESCRIBE"), _acl("User:alice", "READ")]
BOB_PAYMENTS = [_acl("User:bob", "CREATE"), _acl("User:bob", "DESCRIBE"), _acl("User:bob", "WRITE")]
BOB_TX = [_acl("User:bob", "DESCRIBE"), _acl("User:bob", "WRITE")]


def acl_blocks(stdout: str) -> list[tuple[str, tuple[str, ...]]]:
    """kafka-acls output as (header, sorted entry lines) blocks, sorted: the tool prints resources and the
    entries of a resource in the order of a Java hash set, which differs between two brokers holding the same
    ACLs. Every header and entry line stays as printed (only surrounding blanks are dropped)."""
    blocks: list[tuple[str, list[str]]] = []
    for ln in stdout.splitlines():
        s = ln.strip()
        if not s:
            continue
        if s.startswith("(principal="):
            assert blocks, f"an ACL entry before any header:\n{stdout}"
            blocks[-1][1].append(s)
        else:
            blocks.append((s, []))
    return sorted((h, tuple(sorted(e))) for h, e in blocks)


def _current(pattern: str, entries: list[str]) -> tuple[str, tuple[str, ...]]:
    return (f"Current ACLs for resource `{pattern}`:", tuple(sorted(entries)))


def _adding(pattern: str, entries: list[str]) -> tuple[str, tuple[str, ...]]:
    return (f"Adding ACLs for resource `{pattern}`:", tuple(sorted(entries)))


# What Kafka 4.4.0's AclCommand prints, after `acl_blocks`, for each step of the scenario.
ACL_EXPECTED = {
    "add alice": sorted([_adding(_ACL_ORDERS, ALICE_ORDERS)]),
    "add producer bob": sorted([_adding(_ACL_TX, BOB_TX), _adding(_ACL_PAYMENTS, BOB_PAYMENTS)]),
    "list --topic orders": [_current(_ACL_ORDERS, ALICE_ORDERS)],
    "list": sorted([_current(_ACL_ORDERS, ALICE_ORDERS), _current(_ACL_PAYMENTS, BOB_PAYMENTS),
                    _current(_ACL_TX, BOB_TX)]),
    "list --principal User:alice": sorted([("ACLs for principal `User:alice`", ()),
                                           _current(_ACL_ORDERS, ALICE_ORDERS)]),
    "remove alice": [],
    "remove producer bob": [],
    "list after remove": [],
}
ACL_STEPS = {
    "add alice": ACL_ADD_ALICE,
    "add producer bob": ["--add", *ACL_PRODUCER_BOB],
    "list --topic orders": ["--list", "--topic", "orders"],
    "list": ["--list"],
    "list --principal User:alice": ["--list", "--principal", "User:alice"],
    "remove alice": ["--remove", "--force", *ACL_ADD_ALICE[1:]],
    "remove producer bob": ["--remove", "--force", *ACL_PRODUCER_BOB],
    "list after remove": ["--list"],
}
# Kafka's ACLs reach its broker through the metadata log a moment after CreateAcls / DeleteAcls answered: a
# --list is repeated (on either broker) until it shows what the step before it left, within this time.
ACL_SETTLE_S = 30.0
ACL_INVALID_ERROR = ("Error while executing ACL command: org.apache.kafka.common.errors.InvalidRequestException: "
                     "Invalid empty resource name")
_ACL_TRANSCRIPTS: dict[str, dict[str, tuple[int, list]]] = {}


@pytest.fixture(scope="module", params=["kafka", "ringleader"])
def acl_broker(request, tmp_path_factory):
    """Either broker with ACL_SETS, started for the kafka-acls test only (the module's other brokers run
    without an authorizer)."""
    if request.param == "kafka":
        from kafka_ref import RefKafka, java_available
        if not java_available():
            msg = "java not found: the reference broker (scripts/kafka-ref.sh) needs a JDK 17+"
            if os.environ.get("CI"):
                pytest.fail(msg)
            pytest.skip(msg)
        b = RefKafka(tmp_path_factory.mktemp("kafka-acls"), sets=ACL_SETS).start()
    else:
        d = tmp_path_factory.mktemp("ringleader-acls")
        b = Broker(data_dir=d / "data", log_path=d / "ringleader.log", sets=ACL_SETS).start()
    b.kind = request.param
    try:
        yield b
    finally:
        if request.param == "kafka":
            b.stop()
        else:
            b.kill()


def test_kafka_acls_add_list_remove(acl_broker):
    """kafka-acls --add (explicit operations; --producer with a prefixed transactional id), --list (one topic, all,
    one principal), --remove --force, --list once more, and an empty topic name: every step prints what Kafka
    4.4.0 prints (ACL_EXPECTED, after sorting the hash-ordered entries) with exit code 0, the invalid one fails
    with Kafka's INVALID_REQUEST message on both. Run against Kafka itself, the expectations are checked to be
    the reference's output; run against Ringleader, the same expectations hold, and when both parameters run in
    one process the two transcripts are also compared directly."""
    b = acl_broker
    transcript: dict[str, tuple[int, list]] = {}

    def acls(*args: str):
        return kafka_tool("acls", "--bootstrap-server", b.bootstrap, *args)

    for step, args in ACL_STEPS.items():
        expected = ACL_EXPECTED[step]
        deadline = time.monotonic() + (ACL_SETTLE_S if args[0] == "--list" else 0)
        while True:
            r = acls(*args)
            got = acl_blocks(r.stdout)
            if (r.rc == 0 and got == expected) or time.monotonic() >= deadline:
                break
            time.sleep(1.0)
        assert r.rc == 0, f"{b.kind}: {step}\n{r}"
        assert "Exception" not in r.stdout + r.stderr, f"{b.kind}: {step}\n{r}"
        assert got == expected, f"{b.kind}: {step}: got\n{json.dumps(got, indent=1)}\nexpected\n" \
                                f"{json.dumps(expected, indent=1)}\n{r}"
        transcript[step] = (r.rc, got)
    r = acls("--add", "--allow-principal", "User:alice", "--operation", "Read", "--topic", "")
    assert r.rc != 0, f"{b.kind}: an empty topic name was accepted\n{r}"
    assert ACL_INVALID_ERROR in r.stdout + r.stderr, f"{b.kind}: empty topic name\n{r}"
    transcript["add empty topic name"] = (r.rc, [ACL_INVALID_ERROR])
    r = acls("--list")
    assert r.rc == 0 and r.stdout.strip() == "", f"{b.kind}: the refused add left ACLs\n{r}"

    _ACL_TRANSCRIPTS[b.kind] = transcript
    if len(_ACL_TRANSCRIPTS) == 2:
        k, rl = _ACL_TRANSCRIPTS["kafka"], _ACL_TRANSCRIPTS["ringleader"]
        diffs = [f"{s}:\n  kafka:      {k.get(s)!r}\n  ringleader: {rl.get(s)!r}"
                 for s in sorted(set(k) | set(rl)) if k.get(s) != rl.get(s)]
        assert not diffs, "kafka-acls differs between Kafka 4.4.0 and Ringleader:\n" + "\n".join(diffs)


# ------------------------------------------------------------------ kafka-configs on users (SCRAM, quotas)
def test_kafka_configs_on_users_prints_what_kafka_prints(sides):
    """`kafka-configs --describe --entity-type users` sends DescribeUserScramCredentials and
    DescribeClientQuotas (48): Ringleader enforces no quotas and answers that none match, so
    both brokers print the same SCRAM credential lines and no quota line. (AlterClientQuotas is
    not served: setting a quota is refused by Ringleader, so it is not compared.)"""
    kafka, rl = sides
    d = Diffs(kafka, rl)
    user = "tools-scram"

    def configs(label: str, *args: str, only_user: bool = False):
        run = lambda b: kafka_tool("configs", "--bootstrap-server", b, *args)  # noqa: E731
        k, r = in_parallel(lambda: run(kafka.bootstrap), lambda: run(rl.bootstrap))
        if only_user:  # other tests or an earlier run may have made users on a shared reference
            keep = lambda t: "\n".join(ln for ln in t.splitlines() if f"'{user}'" in ln)  # noqa: E731
            k.stdout, r.stdout = keep(k.stdout), keep(r.stdout)
        d.runs += 1
        report = compare_results(label, k, r, kafka.norm, rl.norm)
        if report:
            d.failures.append(report)
        return k

    sanity(configs("add a SCRAM credential", "--alter", "--entity-type", "users", "--entity-name", user,
                   "--add-config", "SCRAM-SHA-256=[iterations=8192,password=tools-pw]"),
           ["Completed updating config for user tools-scram."])
    line = f"SCRAM credential configs for user-principal '{user}' are SCRAM-SHA-256=iterations=8192"
    sanity(configs("describe the user", "--describe", "--entity-type", "users", "--entity-name", user), [line])
    sanity(configs("describe every user", "--describe", "--entity-type", "users", only_user=True), [line])
    sanity(configs("describe the default user", "--describe", "--entity-type", "users", "--entity-default"))
    sanity(configs("describe every client id", "--describe", "--entity-type", "clients"))
    sanity(configs("describe a user's client ids", "--describe", "--entity-type", "users", "--entity-name", user,
                   "--entity-type", "clients"))
    sanity(configs("delete the credential", "--alter", "--entity-type", "users", "--entity-name", user,
                   "--delete-config", "SCRAM-SHA-256"),
           ["Completed updating config for user tools-scram."])
    d.check()
