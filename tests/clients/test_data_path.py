"""The data path with real clients: Produce, Fetch, ListOffsets, InitProducerId, DeleteRecords,
DeleteTopics, topic configs (message.timestamp.type), and durability of records across restarts.

* (a) the seed walkthrough (reference §10, Example 1) with records: `orders` has 6 partitions and
  60 keyed records; consumer A of `g-classic` (range) consumes the first 30 and commits
  synchronously after each record, B joins, the other 30 are produced once A and B have split
  the partitions; every record is consumed exactly once across A and B (B starts at A's commits),
  the committed offsets equal the high watermarks (60 in all), and a new member of the group reads
  nothing. Then the same with the KIP-848 consumer protocol (`g-consumer`).
* (b) kcat -P / kcat -C -e: exact payloads, keys, partitions and offsets.
* (c) kafka-python producing into a topic created with message.timestamp.type=LogAppendTime: the
  broker's clock, not the producer's timestamp, in the produce response and in fetched batches.
* (d) every acknowledged record (acks=all) survives SIGTERM and SIGKILL, in order per partition,
  and the log end offsets carry on after the restart.
* (e) a corrupt or torn tail of the last segment (after SIGKILL) is truncated when the log is recovered and
  logged; everything before it stays readable.
* (f) ListOffsets: earliest, latest, by timestamp, max timestamp; watermarks; DeleteRecords moving
  the log start offset.
* (g) an idempotent producer (InitProducerId, sequence numbers): 1000 records, no duplicates.
* (h) a deleted and re-created topic is empty.
* compressed batches (gzip, snappy, lz4, zstd) and record headers round-trip; a Fetch parked on
  an empty partition returns as soon as a record is appended; a record larger than the fetch
  limits is still returned (KIP-74).

Every client call is bounded; the broker listens on 127.0.0.1 only.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import signal
import socket
import subprocess
import time
import uuid
from collections import namedtuple

import pytest

from confluent_kafka import (OFFSET_BEGINNING, TIMESTAMP_CREATE_TIME, TIMESTAMP_LOG_APPEND_TIME, Consumer,
                             KafkaError, KafkaException, Producer, TopicPartition)
from confluent_kafka.admin import ConfigResource, NewTopic, OffsetSpec, ResourceType

from harness import (CALL_TIMEOUT_S, assigned, close_quietly, committed, confluent_admin, confluent_consumer, confluent_create, confluent_topics,
                     wait_until)

ALL6 = [0, 1, 2, 3, 4, 5]
GROUP_INITIAL_DELAY_0 = "group.initial.rebalance.delay.ms=0"
FAST_HEARTBEATS = (
    GROUP_INITIAL_DELAY_0,
    "group.consumer.heartbeat.interval.ms=1000",
    "group.consumer.min.heartbeat.interval.ms=1000",
)
KCAT = shutil.which("kcat") or shutil.which("kafkacat")

# Kafka's timestamp types (record batch attributes bit 3) as clients report them.
CREATE_TIME_PY = 0  # kafka-python ConsumerRecord.timestamp_type
LOG_APPEND_TIME_PY = 1

Delivered = namedtuple("Delivered", "partition offset key value timestamp_type timestamp")
Fetched = namedtuple("Fetched", "partition offset key value timestamp_type timestamp")


# ------------------------------------------------------------------------------------ helpers
def producer(broker, **extra) -> Producer:
    """A confluent-kafka producer with bounded timeouts; keys in `extra` use '_' for '.'."""
    conf = {
        "bootstrap.servers": broker.bootstrap,
        "client.id": "ringleader-test-producer",
        "logger": logging.getLogger("librdkafka"),
        "broker.address.family": "v4",
        "acks": "all",
        "linger.ms": 5,
        "message.timeout.ms": 30000,
        "socket.timeout.ms": 10000,
        "socket.connection.setup.timeout.ms": 5000,
        "reconnect.backoff.max.ms": 1000,
    }
    conf.update({k.replace("_", "."): v for k, v in extra.items()})
    return Producer(conf)


def produce_all(prod: Producer, topic: str, items: list[dict], flush_each: bool = False) -> list[Delivered]:
    """Produce `items` (kwargs of Producer.produce: value, key, partition, timestamp) and wait for
    every delivery report; fails on any delivery error. Returns the reports in item order.
    flush_each=True waits for each record before sending the next (one record per batch)."""
    out: list[Delivered | None] = [None] * len(items)
    errors = []

    def report(i):
        def cb(err, msg):
            if err is not None:
                errors.append((i, err))
                return
            ts_type, ts = msg.timestamp()
            out[i] = Delivered(msg.partition(), msg.offset(), msg.key(), msg.value(), ts_type, ts)
        return cb

    for i, it in enumerate(items):
        deadline = time.monotonic() + CALL_TIMEOUT_S
        while True:
            try:
                prod.produce(topic, on_delivery=report(i), **it)
                break
            except BufferError:  # local queue full: serve delivery reports, then retry
                assert time.monotonic() < deadline, "producer queue stayed full"
                prod.poll(0.05)
        if flush_each:
            assert prod.flush(CALL_TIMEOUT_S) == 0, f"record {i} not delivered within {CALL_TIMEOUT_S}s"
        else:
            prod.poll(0)
    left = prod.flush(60)
    assert left == 0, f"{left} records not delivered within 60s"
    assert not errors, f"delivery errors: {errors[:10]}"
    assert all(d is not None for d in out)
    return out  # type: ignore[return-value]


def reader(broker, **extra) -> Consumer:
    """A consumer that is only assigned partitions (no group membership, no commits)."""
    return confluent_consumer(broker, f"reader-{uuid.uuid4().hex[:8]}", client_id="ringleader-test-reader",
                              **extra)


def read_partitions(broker, topic: str, ends: dict[int, int], settle: float = 0.5,
                    timeout: float = 45.0) -> dict[int, list[Fetched]]:
    """Assign `topic`'s partitions from the beginning and read until partition p's last fetched
    offset is ends[p] - 1 (nothing for ends[p] == 0), then keep polling `settle` seconds to catch
    anything past the end. Returns partition -> records in fetch order."""
    got: dict[int, list[Fetched]] = {p: [] for p in ends}
    c = reader(broker)
    try:
        c.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in ends])

        def done():
            return all((got[p][-1].offset if got[p] else -1) >= end - 1 for p, end in ends.items())

        def step():
            msg = c.poll(0.1)
            if msg is None:
                return
            if msg.error() is not None:
                assert msg.error().code() < 0, f"fetch error: {msg.error()}"  # local events only
                return
            ts_type, ts = msg.timestamp()
            got.setdefault(msg.partition(), []).append(
                Fetched(msg.partition(), msg.offset(), msg.key(), msg.value(), ts_type, ts))

        wait_until(done, timeout, f"reading {topic} up to {ends} (got {({p: len(v) for p, v in got.items()})})",
                   step=step)
        deadline = time.monotonic() + settle
        while time.monotonic() < deadline:
            step()
    finally:
        c.close()
    return got


def watermarks(broker, topic: str, partitions) -> dict[int, tuple[int, int]]:
    """partition -> (low, high) watermark, asked from the broker (ListOffsets)."""
    c = reader(broker)
    try:
        return {p: c.get_watermark_offsets(TopicPartition(topic, p), timeout=CALL_TIMEOUT_S, cached=False)
                for p in partitions}
    finally:
        c.close()


def create_topic(admin, name: str, partitions: int, config: dict | None = None) -> None:
    fs = admin.create_topics([NewTopic(name, num_partitions=partitions, replication_factor=1,
                                       config=dict(config or {}))], request_timeout=15, operation_timeout=10)
    fs[name].result(timeout=CALL_TIMEOUT_S)


def kill9(broker) -> None:
    """SIGKILL the broker, then wait (bounded) until its port can be bound again: the kernel tears
    down a killed process's io_uring instances asynchronously, and a pending accept keeps the
    listening socket open for a few milliseconds after the process has been reaped."""
    assert broker.alive(), "broker not running"
    broker.proc.send_signal(signal.SIGKILL)
    broker.proc.wait(timeout=10)
    assert broker.proc.returncode == -signal.SIGKILL, broker.proc.returncode

    def port_free():
        with socket.socket() as s:
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                s.bind((broker.host, broker.port))
                return True
            except OSError:
                return False
    wait_until(port_free, 5, f"port {broker.port} released after SIGKILL", interval=0.01)


def last_start_log(broker) -> str:
    """The broker log since its most recent start (the harness writes a `===== start #N` marker)."""
    text = broker.log_text()
    return text[text.rfind("===== start #"):]


def per_partition(delivered: list[Delivered]) -> dict[int, list[Delivered]]:
    out: dict[int, list[Delivered]] = {}
    for d in sorted(delivered, key=lambda d: (d.partition, d.offset)):
        out.setdefault(d.partition, []).append(d)
    return out


# ------------------------------------------------------------- (a) seed walkthrough, with records
class GroupReader:
    """Consumers of one group that record every record they are given and commit synchronously
    right after it (OffsetCommit of offset + 1), so a partition that moves resumes where its
    previous owner stopped."""

    def __init__(self):
        self.seen: dict[str, list[tuple[int, int, bytes]]] = {}
        self.commit_errors: list = []

    def step(self, *named):
        def _step():
            for name, c in named:
                msg = c.poll(0.05)
                if msg is None:
                    continue
                if msg.error() is not None:
                    assert msg.error().code() < 0, f"{name}: {msg.error()}"
                    continue
                self.seen.setdefault(name, []).append((msg.partition(), msg.offset(), msg.value()))
                try:
                    c.commit(message=msg, asynchronous=False)
                except KafkaException as e:
                    self.commit_errors.append((name, msg.partition(), msg.offset(), e.args[0]))
        return _step

    def total(self) -> int:
        return sum(len(v) for v in self.seen.values())

    def of(self, name: str) -> set[tuple[int, int, bytes]]:
        return set(self.seen.get(name, []))

    def __repr__(self) -> str:
        return "; ".join(f"{n}: {len(v)} records from partitions {sorted({p for p, _, _ in v})}"
                         for n, v in self.seen.items())


class Orders:
    """orders[0..5] and its 60 keyed records (`order-0` .. `order-59`), produced in two halves."""

    def __init__(self, broker):
        self.broker = broker
        admin = confluent_admin(broker)
        assert confluent_create(admin, "orders", partitions=6) is None
        self.delivered: list[Delivered] = []

    def produce(self, first: int, last: int) -> set[tuple[int, int, bytes]]:
        """Produce order-first .. order-last-1 (Java's murmur2 partitioner over the keys); returns
        their (partition, offset, value)."""
        prod = producer(self.broker, partitioner="murmur2_random")
        out = produce_all(prod, "orders", [{"key": f"order-{i}".encode(), "value": f"order-{i}".encode()}
                                           for i in range(first, last)])
        self.delivered += out
        return {(d.partition, d.offset, d.value) for d in out}

    def counts(self) -> dict[int, int]:
        counts = {p: 0 for p in ALL6}
        for d in self.delivered:
            counts[d.partition] += 1
        return counts

    def check_produced(self):
        assert len(self.delivered) == 60
        for p, recs in per_partition(self.delivered).items():
            assert [d.offset for d in recs] == list(range(len(recs))), f"orders[{p}] offsets not 0..n-1: {recs}"
        assert all(self.counts().values()), f"60 keys should reach all 6 partitions: {self.counts()}"
        assert watermarks(self.broker, "orders", ALL6) == {p: (0, n) for p, n in self.counts().items()}


def check_exactly_once(gr: GroupReader, orders: Orders):
    assert not gr.commit_errors, f"synchronous commits failed: {gr.commit_errors}"
    all_seen = [(p, o) for v in gr.seen.values() for p, o, _ in v]
    dup = {x for x in all_seen if all_seen.count(x) > 1}
    assert not dup, f"records consumed more than once: {sorted(dup)} ({gr})"
    want = {(d.partition, d.offset) for d in orders.delivered}
    assert set(all_seen) == want, \
        f"missing {sorted(want - set(all_seen))}, extra {sorted(set(all_seen) - want)} ({gr})"
    values = sorted(v for recs in gr.seen.values() for _, _, v in recs)
    assert values == sorted(f"order-{i}".encode() for i in range(60))


def check_group_drained(make_consumer, counts: dict[int, int]):
    """A new member of the group is given all six partitions at the committed offsets (= the high
    watermarks, 60 in all) and reads nothing."""
    c = make_consumer("consumer-c")
    try:
        c.subscribe(["orders"])
        got = []

        def step():
            msg = c.poll(0.1)
            if msg is not None and msg.error() is None:
                got.append((msg.partition(), msg.offset()))

        wait_until(lambda: assigned(c) == ALL6, 30, "C owning orders[0..5]", step=step)
        deadline = time.monotonic() + 3
        while time.monotonic() < deadline:
            step()
        assert got == [], f"C read records that were already consumed and committed: {got}"
        offs = committed(c, "orders", ALL6)
        assert offs == counts, f"committed {offs}, high watermarks {counts}"
        assert sum(offs.values()) == 60
        pos = {tp.partition: tp.offset for tp in c.position([TopicPartition("orders", p) for p in ALL6])}
        # librdkafka reports -1001 (OFFSET_INVALID) until it has fetched once; then the committed offset
        assert all(pos[p] in (counts[p], -1001) for p in ALL6), pos
    finally:
        close_quietly(c)


def run_example1(broker, make_consumer, split_reached):
    """Records 0..29 are in `orders` when A starts; A consumes them all (committing each). B joins;
    once the group has settled (`split_reached(a, b)`), records 30..59 are produced. B must read
    exactly the second-half records of its own partitions (it starts at A's committed offsets, so
    none of the first half), A everything else; then a new member reads nothing."""
    orders = Orders(broker)
    first = orders.produce(0, 30)
    gr = GroupReader()
    a, b = make_consumer("consumer-a"), make_consumer("consumer-b")
    try:
        a.subscribe(["orders"])
        wait_until(lambda: gr.total() >= 30 and assigned(a) == ALL6, 30, f"A consuming 30 records ({gr})",
                   step=gr.step(("A", a)))
        b.subscribe(["orders"])
        wait_until(lambda: split_reached(a, b), 45, "the group settling on A and B", step=gr.step(("A", a), ("B", b)))
        parts_a, parts_b = assigned(a), assigned(b)
        assert sorted(parts_a + parts_b) == ALL6
        second = orders.produce(30, 60)
        orders.check_produced()
        wait_until(lambda: gr.total() >= 60, 30, f"all 60 records consumed ({gr})", step=gr.step(("A", a), ("B", b)))
        deadline = time.monotonic() + 2  # nothing more arrives
        while time.monotonic() < deadline:
            gr.step(("A", a), ("B", b))()
        check_exactly_once(gr, orders)
        assert gr.of("A") == first | {r for r in second if r[0] in parts_a}, gr
        assert gr.of("B") == {r for r in second if r[0] in parts_b}, gr
        assert gr.of("B"), f"B got no records (its partitions {parts_b} got none of the second half)"
        assert committed(a, "orders", ALL6) == orders.counts()
    finally:
        close_quietly(a, b)
    check_group_drained(make_consumer, orders.counts())


def test_seed_example1_classic_records_consumed_exactly_once(start_broker):
    broker = start_broker(GROUP_INITIAL_DELAY_0)

    def make(cid):
        return confluent_consumer(broker, "g-classic", client_id=cid, partition_assignment_strategy="range")

    # range over sorted member ids (consumer-a... < consumer-b...): A=[0,1,2], B=[3,4,5]
    run_example1(broker, make, lambda a, b: assigned(a) == [0, 1, 2] and assigned(b) == [3, 4, 5])


def kip848_consumer(broker, group: str, client_id: str) -> Consumer:
    return Consumer({
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
    })


def test_seed_example1_consumer_protocol_records_consumed_exactly_once(start_broker):
    broker = start_broker(*FAST_HEARTBEATS)

    def make(cid):
        return kip848_consumer(broker, "g-consumer", cid)

    # uniform assignor, two members, six partitions: three each
    run_example1(broker, make, lambda a, b: len(assigned(a)) == 3 and len(assigned(b)) == 3)


# ----------------------------------------------------------------------------------- (b) kcat
@pytest.fixture
def kcat():
    if KCAT is None:
        if os.environ.get("CI"):
            pytest.fail("kcat is not installed, but CI must have it (.ci/run installs it with apt-get)")
        pytest.skip("kcat not installed (apt-get install kcat); CI installs it")
    return KCAT


def run_kcat(kcat, *args, stdin: str | None = None) -> subprocess.CompletedProcess:
    # Debian's kcat (librdkafka 2.0.2): keep its own timeouts short and bound the process too
    return subprocess.run([kcat, *args, "-X", "broker.address.family=v4", "-X", "socket.timeout.ms=10000"],
                          input=stdin, capture_output=True, text=True, timeout=60,
                          stdin=None if stdin is not None else subprocess.DEVNULL)


def test_kcat_produce_and_consume_exact_payloads(broker, kcat):
    admin = confluent_admin(broker)
    assert confluent_create(admin, "kcat-data", partitions=2) is None
    p0 = ["k0:hello", "k1:second line", "k2:ünïcode ✓", "k3:{\"json\": [1, 2, 3]}", "k4:trailing spaces  "]
    p1 = ["a:alpha", "b:beta"]
    for part, lines in ((0, p0), (1, p1)):
        out = run_kcat(kcat, "-P", "-b", broker.bootstrap, "-t", "kcat-data", "-p", str(part), "-K", ":",
                       "-X", "acks=all", stdin="\n".join(lines) + "\n")
        assert out.returncode == 0, f"kcat -P failed ({out.returncode}): {out.stderr}"

    out = run_kcat(kcat, "-C", "-b", broker.bootstrap, "-t", "kcat-data", "-o", "beginning", "-e", "-q",
                   "-f", "%p|%o|%k|%s\\n")
    assert out.returncode == 0, f"kcat -C failed ({out.returncode}): {out.stderr}"
    rows = [ln.split("|", 3) for ln in out.stdout.splitlines()]
    got = {0: [], 1: []}
    for p, o, k, v in rows:
        got[int(p)].append((int(o), k, v))
    for part, lines in ((0, p0), (1, p1)):
        want = [(i, *ln.split(":", 1)) for i, ln in enumerate(lines)]
        assert got[part] == want, f"partition {part}: {got[part]} != {want}"

    # kcat -C of one partition from an offset, JSON envelope (exact key/payload bytes)
    out = run_kcat(kcat, "-C", "-b", broker.bootstrap, "-t", "kcat-data", "-p", "0", "-o", "2", "-e", "-q", "-J")
    assert out.returncode == 0, out.stderr
    msgs = [json.loads(ln) for ln in out.stdout.splitlines()]
    assert [(m["partition"], m["offset"], m["key"], m["payload"]) for m in msgs] == \
        [(0, i, *p0[i].split(":", 1)) for i in range(2, len(p0))]
    assert all(m["tstype"] == "create" and m["ts"] > 0 for m in msgs), msgs


# ------------------------------------------------------------------- (c) LogAppendTime topics
def test_log_append_time_topic_with_kafka_python(broker):
    from kafka import KafkaConsumer, KafkaProducer, TopicPartition as KTP
    from kafka.admin import KafkaAdminClient

    kadmin = KafkaAdminClient(bootstrap_servers=broker.bootstrap, client_id="ringleader-test-kp-admin",
                              request_timeout_ms=10000, bootstrap_timeout_ms=10000)
    try:
        kadmin.create_topics({
            "lat-topic": {"num_partitions": 1, "replication_factor": 1,
                          "configs": {"message.timestamp.type": "LogAppendTime"}},
            "ct-topic": {"num_partitions": 1, "replication_factor": 1},
        })
    finally:
        kadmin.close()

    old = int(time.time() * 1000) - 3_600_000  # the producer claims an hour ago
    prod = KafkaProducer(bootstrap_servers=broker.bootstrap, client_id="ringleader-test-kp-producer", acks="all",
                         linger_ms=0, request_timeout_ms=10000, max_block_ms=20000)
    try:
        before = int(time.time() * 1000)
        lat = [prod.send("lat-topic", key=b"k%d" % i, value=b"v%d" % i, timestamp_ms=old).get(timeout=20)
               for i in range(3)]
        after = int(time.time() * 1000)
        ct = prod.send("ct-topic", value=b"create-time", timestamp_ms=old).get(timeout=20)
    finally:
        prod.close(timeout=10)

    assert [m.offset for m in lat] == [0, 1, 2]
    for m in lat:
        # the broker's append time from the produce response, not the producer's timestamp
        assert before - 2000 <= m.timestamp <= after + 2000, (m.timestamp, before, after, old)
    assert ct.timestamp == old, "CreateTime topic: RecordMetadata carries the producer's timestamp"

    cons = KafkaConsumer(bootstrap_servers=broker.bootstrap, client_id="ringleader-test-kp-consumer",
                         enable_auto_commit=False, auto_offset_reset="earliest", request_timeout_ms=15000,
                         fetch_max_wait_ms=200)
    try:
        got = {}
        cons.assign([KTP("lat-topic", 0), KTP("ct-topic", 0)])
        cons.seek_to_beginning()
        deadline = time.monotonic() + 30
        while sum(len(v) for v in got.values()) < 4 and time.monotonic() < deadline:
            for tp, recs in cons.poll(timeout_ms=200).items():
                got.setdefault(tp.topic, []).extend(recs)
    finally:
        cons.close()
    assert [r.value for r in got.get("lat-topic", [])] == [b"v0", b"v1", b"v2"], got
    for r, m in zip(got["lat-topic"], lat):
        assert r.timestamp_type == LOG_APPEND_TIME_PY, r
        assert r.timestamp == m.timestamp, (r, m)
        assert r.timestamp != old
    (r,) = got["ct-topic"]
    assert (r.timestamp_type, r.timestamp) == (CREATE_TIME_PY, old), r


def test_log_append_time_with_confluent_and_describe_configs(broker):
    """librdkafka sees LogAppendTime in the delivery report and on fetched records; DescribeConfigs
    reports the topic's setting."""
    admin = confluent_admin(broker)
    create_topic(admin, "lat-c", 2, {"message.timestamp.type": "LogAppendTime"})
    old = int(time.time() * 1000) - 86_400_000
    before = int(time.time() * 1000)
    delivered = produce_all(producer(broker), "lat-c", [{"value": b"x%d" % i, "partition": i % 2, "timestamp": old}
                                                        for i in range(10)])
    after = int(time.time() * 1000)
    for d in delivered:
        assert d.timestamp_type == TIMESTAMP_LOG_APPEND_TIME, d
        assert before - 2000 <= d.timestamp <= after + 2000, (d, before, after)
    got = read_partitions(broker, "lat-c", {0: 5, 1: 5})
    for recs in got.values():
        for r in recs:
            assert r.timestamp_type == TIMESTAMP_LOG_APPEND_TIME, r
            assert before - 2000 <= r.timestamp <= after + 2000, r

    res = admin.describe_configs([ConfigResource(ResourceType.TOPIC, "lat-c")], request_timeout=15)
    (fut,) = res.values()
    entries = fut.result(timeout=CALL_TIMEOUT_S)
    assert entries["message.timestamp.type"].value == "LogAppendTime", entries["message.timestamp.type"]


# ------------------------------------------------------------------- (d) restart durability
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGKILL], ids=["sigterm", "sigkill"])
def test_acknowledged_records_survive_restart(broker, sig):
    admin = confluent_admin(broker)
    assert confluent_create(admin, "durable", partitions=3) is None
    n = 3000
    prod = producer(broker, acks="all", partitioner="murmur2_random")
    delivered = produce_all(prod, "durable", [{"key": b"key-%d" % (i % 97), "value": b"rec-%06d" % i}
                                              for i in range(n)])
    del prod
    by_part = per_partition(delivered)
    ends = {p: len(by_part.get(p, [])) for p in range(3)}
    assert sum(ends.values()) == n and all(ends.values()), ends
    for p, recs in by_part.items():
        assert [d.offset for d in recs] == list(range(len(recs)))

    if sig == signal.SIGTERM:
        broker.restart()  # asserts exit code 0
    else:
        kill9(broker)
        broker.start()

    assert watermarks(broker, "durable", range(3)) == {p: (0, e) for p, e in ends.items()}
    got = read_partitions(broker, "durable", ends)
    for p in range(3):
        want = [(d.offset, d.key, d.value) for d in by_part[p]]
        have = [(r.offset, r.key, r.value) for r in got[p]]
        assert have == want, f"durable[{p}]: {len(have)} records read back, {len(want)} acknowledged; " \
                             f"first difference at {next((i for i, (x, y) in enumerate(zip(have, want)) if x != y), min(len(have), len(want)))}"

    # the log end offsets carry on after the restart
    more = produce_all(producer(broker), "durable", [{"value": b"after-%d" % p, "partition": p} for p in range(3)])
    assert {d.partition: d.offset for d in more} == ends


# ------------------------------------------------------------------- (e) corrupt / torn tail
def last_segment(broker, topic: str, partition: int = 0):
    pdir = broker.data_dir / f"{topic}-{partition}"
    assert pdir.is_dir(), f"no partition directory {pdir}; data dir holds {sorted(os.listdir(broker.data_dir))}"
    logs = sorted(f for f in pdir.iterdir() if f.suffix == ".log" and f.stat().st_size > 0)
    assert logs, f"no non-empty .log segment in {pdir}: {sorted(os.listdir(pdir))}"
    return logs[-1]


@pytest.mark.parametrize("damage", ["flip-last-bytes", "append-garbage"])
def test_corrupt_tail_is_truncated_on_start(broker, damage):
    admin = confluent_admin(broker)
    assert confluent_create(admin, "torn", partitions=1) is None
    n = 20
    # one record per batch (each waits for its acknowledgement), so batch boundaries are known
    delivered = produce_all(producer(broker, linger_ms=0), "torn",
                            [{"key": b"k%d" % i, "value": b"torn-value-%04d" % i, "partition": 0} for i in range(n)],
                            flush_each=True)
    assert [d.offset for d in delivered] == list(range(n))
    kill9(broker)  # unclean: the next start must recover the log

    seg = last_segment(broker, "torn")
    size = seg.stat().st_size
    if damage == "flip-last-bytes":
        # the last 4 bytes are inside the last batch's last record (its value): CRC mismatch
        with open(seg, "r+b") as f:
            f.seek(size - 4)
            tail = f.read(4)
            f.seek(size - 4)
            f.write(bytes(b ^ 0xFF for b in tail))
        survivors = n - 1
    else:
        # a torn append: the start of a batch header (base offset n, a length past the end of file)
        with open(seg, "ab") as f:
            f.write(n.to_bytes(8, "big") + (4096).to_bytes(4, "big") + b"\x00\x00\x00\x00\x02" + os.urandom(20))
        survivors = n

    broker.start()
    assert watermarks(broker, "torn", [0]) == {0: (0, survivors)}
    got = read_partitions(broker, "torn", {0: survivors})
    assert [(r.offset, r.key, r.value) for r in got[0]] == \
        [(d.offset, d.key, d.value) for d in delivered[:survivors]]
    # recovery may run at start-up or when the partition is first used (it has been by now)
    wait_until(lambda: "truncat" in last_start_log(broker).lower(), 5,
               f"the broker logging the truncation of {seg}:\n{last_start_log(broker)[-3000:]}")
    # appends continue right after the last intact batch
    (d,) = produce_all(producer(broker), "torn", [{"value": b"after", "partition": 0}])
    assert d.offset == survivors
    got = read_partitions(broker, "torn", {0: survivors + 1})
    assert [r.value for r in got[0]][-1] == b"after"
    assert len(got[0]) == survivors + 1


# ---------------------------------------------------------------- (f) ListOffsets, DeleteRecords
def test_list_offsets_watermarks_and_delete_records(broker):
    admin = confluent_admin(broker)
    assert confluent_create(admin, "lo", partitions=2) is None
    t0 = (int(time.time() * 1000) // 1000) * 1000 - 600_000
    stamps = [t0, t0 + 1000, t0 + 2000, t0 + 9000, t0 + 3000, t0 + 4000]  # offset 3 has the max timestamp
    # one record per batch, so every record's timestamp is its own batch's max timestamp
    delivered = produce_all(producer(broker, linger_ms=0), "lo",
                            [{"value": b"lo-%d" % i, "partition": 0, "timestamp": ts} for i, ts in enumerate(stamps)],
                            flush_each=True)
    assert [(d.offset, d.timestamp_type, d.timestamp) for d in delivered] == \
        [(i, TIMESTAMP_CREATE_TIME, ts) for i, ts in enumerate(stamps)]
    assert watermarks(broker, "lo", [0, 1]) == {0: (0, 6), 1: (0, 0)}

    # consumer.offsets_for_times: the first offset whose timestamp is >= the target
    c = reader(broker)
    try:
        def for_times(*targets):
            res = c.offsets_for_times([TopicPartition("lo", 0, ts) for ts in targets], timeout=CALL_TIMEOUT_S)
            for tp in res:
                assert tp.error is None, tp
            return [tp.offset for tp in res]
        assert for_times(t0 - 5000) == [0]
        assert for_times(t0) == [0]
        assert for_times(t0 + 1500) == [2]
        assert for_times(t0 + 2500) == [3]  # offset 3 (t0+9000) comes before offset 4 (t0+3000)
        assert for_times(t0 + 9000) == [3]
        assert for_times(t0 + 9001) == [-1]  # none: librdkafka's OFFSET_END
        empty = c.offsets_for_times([TopicPartition("lo", 1, t0)], timeout=CALL_TIMEOUT_S)
        assert [tp.offset for tp in empty] == [-1]
    finally:
        c.close()

    def list_offsets(spec, partition=0):
        tp = TopicPartition("lo", partition)
        fut = admin.list_offsets({tp: spec}, request_timeout=15)[tp]
        r = fut.result(timeout=CALL_TIMEOUT_S)
        return r.offset, r.timestamp

    assert list_offsets(OffsetSpec.earliest()) == (0, -1)
    assert list_offsets(OffsetSpec.latest()) == (6, -1)
    assert list_offsets(OffsetSpec.max_timestamp()) == (3, t0 + 9000)
    assert list_offsets(OffsetSpec.for_timestamp(t0 + 1500)) == (2, t0 + 2000)
    assert list_offsets(OffsetSpec.for_timestamp(t0 + 9001))[0] == -1
    assert list_offsets(OffsetSpec.earliest(), partition=1) == (0, -1)
    assert list_offsets(OffsetSpec.latest(), partition=1) == (0, -1)

    # DeleteRecords: everything before offset 3 goes; the low watermark moves, the high one stays
    tp = TopicPartition("lo", 0, 3)
    res = admin.delete_records([tp], request_timeout=15, operation_timeout=10)
    (fut,) = res.values()
    assert fut.result(timeout=CALL_TIMEOUT_S).low_watermark == 3
    assert watermarks(broker, "lo", [0]) == {0: (3, 6)}
    assert list_offsets(OffsetSpec.earliest()) == (3, -1)
    assert list_offsets(OffsetSpec.latest()) == (6, -1)
    assert list_offsets(OffsetSpec.for_timestamp(t0))[0] == 3  # never below the log start offset
    got = read_partitions(broker, "lo", {0: 6})
    assert [(r.offset, r.value) for r in got[0]] == [(i, b"lo-%d" % i) for i in range(3, 6)]

    # deleting up to an offset below the log start offset changes nothing
    (fut,) = admin.delete_records([TopicPartition("lo", 0, 1)], request_timeout=15, operation_timeout=10).values()
    assert fut.result(timeout=CALL_TIMEOUT_S).low_watermark == 3
    # past the high watermark: OFFSET_OUT_OF_RANGE
    (fut,) = admin.delete_records([TopicPartition("lo", 0, 7)], request_timeout=15, operation_timeout=10).values()
    with pytest.raises(KafkaException) as ei:
        fut.result(timeout=CALL_TIMEOUT_S)
    assert ei.value.args[0].code() == KafkaError.OFFSET_OUT_OF_RANGE, ei.value
    # OFFSET_END (-1): delete everything up to the high watermark
    (fut,) = admin.delete_records([TopicPartition("lo", 0, -1)], request_timeout=15, operation_timeout=10).values()
    assert fut.result(timeout=CALL_TIMEOUT_S).low_watermark == 6
    assert watermarks(broker, "lo", [0]) == {0: (6, 6)}
    # the partition keeps appending at 6
    (d,) = produce_all(producer(broker), "lo", [{"value": b"lo-6", "partition": 0}])
    assert d.offset == 6
    assert watermarks(broker, "lo", [0]) == {0: (6, 7)}


def test_deleted_records_stay_deleted_after_restart(broker):
    admin = confluent_admin(broker)
    assert confluent_create(admin, "lo-restart", partitions=1) is None
    produce_all(producer(broker), "lo-restart", [{"value": b"r%d" % i, "partition": 0} for i in range(10)])
    (fut,) = admin.delete_records([TopicPartition("lo-restart", 0, 4)], request_timeout=15,
                                  operation_timeout=10).values()
    assert fut.result(timeout=CALL_TIMEOUT_S).low_watermark == 4
    broker.restart()
    assert watermarks(broker, "lo-restart", [0]) == {0: (4, 10)}
    got = read_partitions(broker, "lo-restart", {0: 10})
    assert [r.offset for r in got[0]] == list(range(4, 10))


# --------------------------------------------------------------------- (g) idempotent producer
def test_idempotent_producer_1000_records_no_duplicates(broker):
    admin = confluent_admin(broker)
    assert confluent_create(admin, "idem", partitions=3) is None
    prod = producer(broker, enable_idempotence=True, linger_ms=2, batch_num_messages=50)
    n = 1000
    delivered = produce_all(prod, "idem", [{"key": b"k%d" % (i % 31), "value": b"idem-%05d" % i}
                                           for i in range(n)])
    by_part = per_partition(delivered)
    ends = {p: len(by_part.get(p, [])) for p in range(3)}
    for p, recs in by_part.items():
        assert [d.offset for d in recs] == list(range(len(recs))), f"idem[{p}] offsets not contiguous"
    got = read_partitions(broker, "idem", ends, settle=1.0)
    values = [r.value for recs in got.values() for r in recs]
    assert len(values) == n, f"{len(values)} records consumed, {n} produced"
    assert len(set(values)) == n, "duplicates consumed"
    assert set(values) == {b"idem-%05d" % i for i in range(n)}
    # per key (one partition each) the records are in production order
    for p, recs in got.items():
        assert [r.offset for r in recs] == list(range(ends[p]))
        by_key: dict[bytes, list[int]] = {}
        for r in recs:
            by_key.setdefault(r.key, []).append(int(r.value.split(b"-")[1]))
        for k, seq in by_key.items():
            assert seq == sorted(seq), f"key {k!r} out of order in partition {p}"


# -------------------------------------------------------------------------- (h) topic deletion
def test_deleted_then_recreated_topic_is_empty(broker):
    admin = confluent_admin(broker)
    assert confluent_create(admin, "recycled", partitions=2) is None
    produce_all(producer(broker), "recycled", [{"value": b"old-%d" % i, "partition": i % 2} for i in range(10)])
    assert watermarks(broker, "recycled", [0, 1]) == {0: (0, 5), 1: (0, 5)}

    fs = admin.delete_topics(["recycled"], request_timeout=15, operation_timeout=10)
    assert fs["recycled"].result(timeout=CALL_TIMEOUT_S) is None
    wait_until(lambda: "recycled" not in confluent_topics(admin), 20, "recycled gone from metadata", interval=0.2)

    def recreate():
        err = confluent_create(admin, "recycled", partitions=2)
        assert err is None or err.code() == KafkaError.TOPIC_ALREADY_EXISTS, err  # deletion still in progress
        return err is None
    wait_until(recreate, 30, "recreating recycled", interval=0.5)

    assert watermarks(broker, "recycled", [0, 1]) == {0: (0, 0), 1: (0, 0)}
    got = read_partitions(broker, "recycled", {0: 0, 1: 0}, settle=2.0)
    assert got == {0: [], 1: []}, got
    delivered = produce_all(producer(broker), "recycled", [{"value": b"new", "partition": 1}])
    assert [(d.partition, d.offset) for d in delivered] == [(1, 0)]
    got = read_partitions(broker, "recycled", {0: 0, 1: 1})
    assert [(r.partition, r.offset, r.value) for recs in got.values() for r in recs] == [(1, 0, b"new")]


# --------------------------------------------------------------------- compression, headers, fetch
@pytest.mark.parametrize("codec", ["gzip", "snappy", "lz4", "zstd"])
def test_compressed_batches_and_headers_round_trip(broker, codec):
    admin = confluent_admin(broker)
    topic = f"codec-{codec}"
    assert confluent_create(admin, topic, partitions=2) is None
    items = [{"key": b"k%d" % (i % 7), "value": (b"%s-%05d-" % (codec.encode(), i)) * (1 + i % 13),
              "headers": [("seq", b"%d" % i), ("codec", codec.encode())], "partition": i % 2}
             for i in range(400)]
    delivered = produce_all(producer(broker, compression_type=codec, linger_ms=20), topic, items)
    ends = {p: sum(1 for d in delivered if d.partition == p) for p in (0, 1)}
    got = {}
    c = reader(broker)
    try:
        c.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in (0, 1)])

        def step():
            msg = c.poll(0.1)
            if msg is not None and msg.error() is None:
                got[(msg.partition(), msg.offset())] = (msg.key(), msg.value(), msg.headers())
            elif msg is not None:
                assert msg.error().code() < 0, msg.error()
        wait_until(lambda: len(got) >= 400, 30, f"400 {codec} records", step=step)
    finally:
        c.close()
    assert sorted(got) == sorted((p, o) for p in (0, 1) for o in range(ends[p]))
    for d, it in zip(delivered, items):
        key, value, headers = got[(d.partition, d.offset)]
        assert (key, value) == (it["key"], it["value"])
        assert headers == it["headers"], headers


def test_fetch_long_poll_returns_as_soon_as_a_record_arrives(broker):
    """A Fetch parked on an empty partition (fetch.wait.max.ms=8000) completes when a record is
    appended, not when the wait expires."""
    admin = confluent_admin(broker)
    assert confluent_create(admin, "longpoll", partitions=1) is None
    c = reader(broker, fetch_wait_max_ms=8000, socket_timeout_ms=30000)
    try:
        c.assign([TopicPartition("longpoll", 0, OFFSET_BEGINNING)])
        deadline = time.monotonic() + 2  # let the consumer's Fetch park on the broker
        while time.monotonic() < deadline:
            msg = c.poll(0.1)
            assert msg is None or msg.error() is not None, msg
        latencies = []
        prod = producer(broker, linger_ms=0)
        for i in range(3):
            (d,) = produce_all(prod, "longpoll", [{"value": b"wake-%d" % i, "partition": 0}])
            acked = time.monotonic()
            msg = None
            while time.monotonic() - acked < 12:
                msg = c.poll(0.05)
                if msg is not None and msg.error() is None:
                    break
            assert msg is not None and msg.error() is None and msg.value() == b"wake-%d" % i, msg
            latencies.append(time.monotonic() - acked)
            time.sleep(1.0)  # the next Fetch parks again
        assert max(latencies) < 2.0, f"record delivery took {latencies}s: a parked Fetch waited out max_wait_ms"
    finally:
        c.close()


def test_record_larger_than_fetch_limits_is_still_returned(broker):
    """KIP-74: the first batch of a partition comes back even when it is larger than
    max.partition.fetch.bytes / fetch.max.bytes, so a consumer always makes progress."""
    admin = confluent_admin(broker)
    assert confluent_create(admin, "big", partitions=1) is None
    big = [os.urandom(300_000) for _ in range(3)]
    produce_all(producer(broker, linger_ms=0), "big", [{"value": v, "partition": 0} for v in big], flush_each=True)
    # (librdkafka wants fetch.max.bytes >= message.max.bytes, whose minimum is 1000)
    c = reader(broker, max_partition_fetch_bytes=1024, fetch_max_bytes=1024, message_max_bytes=1000)
    try:
        c.assign([TopicPartition("big", 0, OFFSET_BEGINNING)])
        got = []

        def step():
            msg = c.poll(0.1)
            if msg is not None and msg.error() is None:
                got.append(msg.value())
            elif msg is not None:
                assert msg.error().code() < 0, msg.error()
        wait_until(lambda: len(got) >= 3, 30, "three 300 kB records with 1 kB fetch limits", step=step)
    finally:
        c.close()
    assert got == big


# ---------------------------------------------------------------------------------- retention
RETENTION_FAST = "log.retention.check.interval.ms=500"
SEGMENT_1MB = str(1 << 20)  # Kafka 4 (KIP-1030) rejects segment.bytes below 1 MiB


def segment_bases(broker, topic: str, partition: int = 0) -> list[int]:
    return sorted(int(f.stem) for f in (broker.data_dir / f"{topic}-{partition}").glob("*.log"))


def check_segment_sizes(broker, topic: str, limit: int, partition: int = 0) -> None:
    """A segment rolls before an append that would take it past segment.bytes (Kafka's
    LogSegment.shouldRoll), so with batches far smaller than the limit no file exceeds it."""
    sizes = {f.name: f.stat().st_size for f in (broker.data_dir / f"{topic}-{partition}").glob("*.log")}
    assert sizes and max(sizes.values()) <= limit, f"segments larger than segment.bytes={limit}: {sizes}"


def test_retention_bytes_deletes_oldest_segments(start_broker):
    """retention.bytes: whole segments go from the start while the partition is larger than the
    limit (what is left is at least retention.bytes and less than that plus one segment); the
    high watermark stays, the remaining records are readable, the log starts at a segment base."""
    broker = start_broker(RETENTION_FAST)
    admin = confluent_admin(broker)
    create_topic(admin, "ret-bytes", 1, {"segment.bytes": SEGMENT_1MB, "retention.bytes": str(3 << 20)})
    n, size = 500, 10_000  # ~5 MB in ~64 kB batches: ~5 segments
    delivered = produce_all(producer(broker, batch_size=65536), "ret-bytes",
                            [{"value": b"%05d" % i + b"r" * (size - 5), "partition": 0} for i in range(n)])
    assert [d.offset for d in delivered] == list(range(n))
    check_segment_sizes(broker, "ret-bytes", 1 << 20)
    # 3 MiB to 4 MiB left: ~315 to ~420 records of ~10 kB
    wait_until(lambda: watermarks(broker, "ret-bytes", [0])[0][0] > 0, 20,
               "retention.bytes moving the log start offset", interval=0.5)
    time.sleep(1.5)  # further retention passes take nothing more
    (low, high), = watermarks(broker, "ret-bytes", [0]).values()
    assert high == n
    assert 250 <= n - low <= 450, f"{n - low} records of {size} B left after retention.bytes=3 MiB"
    got = read_partitions(broker, "ret-bytes", {0: n})
    assert [r.offset for r in got[0]] == list(range(low, n))
    assert [r.value for r in got[0]] == [d.value for d in delivered[low:]]
    # the deleted segments' files go too (Kafka renames them *.log.deleted, then removes them)
    wait_until(lambda: segment_bases(broker, "ret-bytes")[0] == low, 10,
               f"the first segment file starting at the log start offset {low}", interval=0.2)


def test_retention_ms_deletes_segments_with_only_old_records(start_broker):
    """retention.ms: a segment goes when its newest record (CreateTime) is older than retention.ms;
    the segment holding recent records stays, and so does everything after it."""
    broker = start_broker(RETENTION_FAST)
    admin = confluent_admin(broker)
    create_topic(admin, "ret-ms", 1, {"segment.bytes": SEGMENT_1MB, "retention.ms": "3600000"})
    now = int(time.time() * 1000)
    size = 10_000
    old = [{"value": b"old-%03d" % i + b"o" * (size - 7), "partition": 0, "timestamp": now - 7_200_000 + i}
           for i in range(250)]  # two hours old, ~2.5 MB: two full segments and part of a third
    new = [{"value": b"new-%03d" % i + b"n" * (size - 7), "partition": 0} for i in range(5)]
    prod = producer(broker, batch_size=65536)
    delivered = produce_all(prod, "ret-ms", old) + produce_all(prod, "ret-ms", new)
    assert [d.offset for d in delivered] == list(range(255))
    check_segment_sizes(broker, "ret-ms", 1 << 20)
    wait_until(lambda: watermarks(broker, "ret-ms", [0])[0][0] > 0, 20,
               "retention.ms moving the log start offset", interval=0.5)
    time.sleep(1.5)  # further retention passes take nothing more
    (low, high), = watermarks(broker, "ret-ms", [0]).values()
    assert high == 255
    # the segment holding offset 250 (the first recent record) and everything after it stay
    assert 0 < low <= 250, f"log start offset {low}"
    wait_until(lambda: segment_bases(broker, "ret-ms")[0] == low, 10,
               f"the first segment file starting at the log start offset {low}", interval=0.2)
    got = read_partitions(broker, "ret-ms", {0: 255})
    assert [r.value for r in got[0]] == [d.value for d in delivered[low:]]


def test_retention_ms_altered_on_a_live_topic_takes_effect_without_a_restart(start_broker):
    """IncrementalAlterConfigs retention.ms on a topic that already holds old records: describe
    reads the new value back, and the next retention pass removes the old segments."""
    from confluent_kafka.admin import AlterConfigOpType, ConfigEntry, ConfigResource, ResourceType

    broker = start_broker(RETENTION_FAST)
    admin = confluent_admin(broker)
    create_topic(admin, "ret-alter", 1, {"segment.bytes": SEGMENT_1MB})
    now = int(time.time() * 1000)
    size = 10_000
    old = [{"value": b"old-%03d" % i + b"o" * (size - 7), "partition": 0, "timestamp": now - 7_200_000 + i}
           for i in range(250)]
    new = [{"value": b"new-%03d" % i + b"n" * (size - 7), "partition": 0} for i in range(5)]
    prod = producer(broker, batch_size=65536)
    delivered = produce_all(prod, "ret-alter", old) + produce_all(prod, "ret-alter", new)
    assert len(delivered) == 255
    time.sleep(1.5)  # three retention passes under the default retention.ms (7 days) keep all
    assert watermarks(broker, "ret-alter", [0])[0] == (0, 255)

    res = ConfigResource(ResourceType.TOPIC, "ret-alter", incremental_configs=[
        ConfigEntry("retention.ms", "3600000", incremental_operation=AlterConfigOpType.SET)])
    for f in admin.incremental_alter_configs([res]).values():
        assert f.result(timeout=30) is None
    desc = admin.describe_configs([ConfigResource(ResourceType.TOPIC, "ret-alter")])
    entries = next(iter(desc.values())).result(timeout=30)
    assert entries["retention.ms"].value == "3600000"
    assert not entries["retention.ms"].is_default

    wait_until(lambda: watermarks(broker, "ret-alter", [0])[0][0] > 0, 20,
               "the altered retention.ms moving the log start offset", interval=0.5)
    (low, high), = watermarks(broker, "ret-alter", [0]).values()
    assert high == 255 and 0 < low <= 250, (low, high)
