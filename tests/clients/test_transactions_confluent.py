"""Kafka transactions with confluent-kafka (librdkafka): the transactional producer API against Ringleader
(issue 17) and, with the same assertions, against the reference broker (Kafka 4.4.0, `kafka_ref`).

* commit and abort visibility: a committed transaction of N records and an aborted one of M on a 3-partition
  topic; a read_committed Consumer sees exactly the N, a read_uncommitted one all N+M, and both end at the high
  watermark (which counts one marker per partition per transaction);
* consume-transform-produce: input read with read_committed, each record written transformed with the consumed
  positions committed in the same transaction (send_offsets_to_transaction with the consumer's
  consumer_group_metadata()), one transaction aborted and redone: the read_committed output is the input exactly
  once and the group's committed offsets are the input's end offsets;
* fencing: a second producer with the same transactional.id fences the first, whose commit then fails with a
  fatal error (the error code the reference broker leads librdkafka to is asserted on Ringleader too).

Run against one broker with `-k ringleader` or `-k kafka`.
"""

from __future__ import annotations

import logging
import uuid

import pytest

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, KafkaException, Producer, TopicPartition

from harness import CALL_TIMEOUT_S, close_quietly, confluent_admin, confluent_consumer, confluent_create, wait_until

PARTITIONS = 3
INIT_TIMEOUT_S = 30.0

# What the fenced producer's calls end with against the reference broker (measured): the zombie's flush of a record
# to a partition already in its transaction (the Produce gets INVALID_PRODUCER_EPOCH, which librdkafka turns into its
# local fatal _FENCED), then its commit: the error name and whether librdkafka raised it as fatal.
FENCED = {"flush": ("_FENCED", True), "commit": ("_FENCED", True)}


@pytest.fixture(params=["ringleader", "kafka"])
def target(request, start_broker):
    if request.param == "ringleader":
        return start_broker("group.initial.rebalance.delay.ms=0")
    return request.getfixturevalue("kafka_ref")


def txn_producer(broker, txn_id: str, **extra) -> Producer:
    conf = {
        "bootstrap.servers": broker.bootstrap,
        "client.id": f"txn-{txn_id}",
        "transactional.id": txn_id,
        "logger": logging.getLogger("librdkafka"),
        "broker.address.family": "v4",
        "linger.ms": 5,
        "socket.timeout.ms": 10000,
        "socket.connection.setup.timeout.ms": 5000,
        "reconnect.backoff.max.ms": 1000,
        "transaction.timeout.ms": 30000,
    }
    conf.update({k.replace("_", "."): v for k, v in extra.items()})
    return Producer(conf)


def reader(broker, isolation: str) -> Consumer:
    return Consumer({
        "bootstrap.servers": broker.bootstrap,
        "group.id": f"reader-{uuid.uuid4().hex[:8]}",  # assign() only: never joins, never commits
        "logger": logging.getLogger("librdkafka"),
        "broker.address.family": "v4",
        "enable.auto.commit": False,
        "isolation.level": isolation,
        "socket.timeout.ms": 10000,
    })


def high_watermarks(broker, topic: str) -> dict[int, int]:
    c = reader(broker, "read_uncommitted")
    try:
        return {p: c.get_watermark_offsets(TopicPartition(topic, p), timeout=CALL_TIMEOUT_S)[1]
                for p in range(PARTITIONS)}
    finally:
        c.close()


def read_to(broker, topic: str, isolation: str, ends: dict[int, int], timeout: float = 30.0):
    """Every data record of `topic` from the beginning at `isolation`, polling until each partition's position is
    at least `ends[p]` (a read_committed consumer gets there once the LSO has). Returns (values, positions)."""
    c = reader(broker, isolation)
    values: list[str] = []
    try:
        c.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(PARTITIONS)])

        def step():
            for m in c.consume(100, timeout=0.2):
                if m.error():
                    if m.error().code() != KafkaError._PARTITION_EOF:
                        raise KafkaException(m.error())
                    continue
                values.append(m.value().decode())

        def done():
            pos = {tp.partition: tp.offset for tp in c.position([TopicPartition(topic, p) for p in range(PARTITIONS)])}
            return all(pos[p] >= ends[p] for p in range(PARTITIONS)) and pos

        positions = wait_until(done, timeout, f"{isolation} reader of {topic} reaching {ends}", step=step)
        return values, positions
    finally:
        c.close()


def read_count(broker, topic: str, isolation: str, count: int, timeout: float = 30.0) -> list[str]:
    """The data records of `topic` at `isolation` once `count` have arrived, and one more second has brought no
    more. (librdkafka's position() does not step past a commit marker at the end of a partition, so a read that
    ends on a committed transaction cannot wait for the position as read_to does.)"""
    c = reader(broker, isolation)
    values: list[str] = []
    try:
        c.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(PARTITIONS)])

        def step():
            for m in c.consume(100, timeout=0.2):
                if not m.error():
                    values.append(m.value().decode())

        wait_until(lambda: len(values) >= count, timeout, f"{count} records at {isolation} in {topic}", step=step)
        for _ in range(5):
            step()
        return values
    finally:
        c.close()


def test_commit_and_abort_visibility(target):
    topic = f"txn-vis-{uuid.uuid4().hex[:8]}"
    admin = confluent_admin(target)
    assert confluent_create(admin, topic, PARTITIONS) is None
    n, m = 20, 8
    delivered: dict[str, int] = {}

    def on_delivery(err, msg):
        assert err is None, err
        delivered[msg.value().decode()] = msg.partition()

    p = txn_producer(target, f"tx-vis-{topic}")
    p.init_transactions(INIT_TIMEOUT_S)
    p.begin_transaction()
    for i in range(n):
        p.produce(topic, key=f"k{i}", value=f"c{i}", on_delivery=on_delivery)
    p.commit_transaction(CALL_TIMEOUT_S)
    p.begin_transaction()
    for i in range(m):
        p.produce(topic, key=f"k{i}", value=f"a{i}", on_delivery=on_delivery)
    assert p.flush(CALL_TIMEOUT_S) == 0
    p.abort_transaction(CALL_TIMEOUT_S)
    assert len(delivered) == n + m

    # One marker per partition per transaction: the expected high watermarks.
    want = {q: 0 for q in range(PARTITIONS)}
    for prefix in ("c", "a"):
        touched = {q for v, q in delivered.items() if v.startswith(prefix)}
        for v, q in delivered.items():
            if v.startswith(prefix):
                want[q] += 1
        for q in touched:
            want[q] += 1
    wait_until(lambda: high_watermarks(target, topic) == want, 20, f"high watermarks {want} (data + markers)")

    committed, rc_pos = read_to(target, topic, "read_committed", want)
    assert sorted(committed) == sorted(f"c{i}" for i in range(n))
    everything, ru_pos = read_to(target, topic, "read_uncommitted", want)
    assert sorted(everything) == sorted([f"c{i}" for i in range(n)] + [f"a{i}" for i in range(m)])
    assert rc_pos == want and ru_pos == want, (rc_pos, ru_pos, want)


def test_consume_transform_produce_with_send_offsets(target):
    tag = uuid.uuid4().hex[:8]
    src, dst, group = f"ctp-in-{tag}", f"ctp-out-{tag}", f"g-ctp-{tag}"
    admin = confluent_admin(target)
    assert confluent_create(admin, src, PARTITIONS) is None
    assert confluent_create(admin, dst, PARTITIONS) is None
    k = 60
    plain = Producer({"bootstrap.servers": target.bootstrap, "broker.address.family": "v4",
                      "logger": logging.getLogger("librdkafka"), "acks": "all"})
    for i in range(k):
        plain.produce(src, key=f"k{i}", value=f"v{i}")
    assert plain.flush(CALL_TIMEOUT_S) == 0
    in_ends = high_watermarks(target, src)

    c = confluent_consumer(target, group, isolation_level="read_committed")
    p = txn_producer(target, f"tx-ctp-{tag}")
    aborted = 0
    try:
        p.init_transactions(INIT_TIMEOUT_S)
        c.subscribe([src])
        batches = 0

        def positions():
            tps = c.assignment()
            return {tp.partition: tp.offset for tp in c.position(tps)} if len(tps) == PARTITIONS else None

        def caught_up():
            pos = positions()
            return pos is not None and all(pos[q] >= in_ends[q] for q in range(PARTITIONS))

        def step():
            nonlocal batches, aborted
            msgs = [m for m in c.consume(10, timeout=0.3) if not m.error()]
            if not msgs:
                return
            batches += 1
            first: dict[int, int] = {}
            p.begin_transaction()
            for msg in msgs:
                p.produce(dst, key=msg.key(), value=b"t-" + msg.value())
                first.setdefault(msg.partition(), msg.offset())
            p.send_offsets_to_transaction(c.position(c.assignment()), c.consumer_group_metadata(), CALL_TIMEOUT_S)
            if batches == 2 and not aborted:
                assert p.flush(CALL_TIMEOUT_S) == 0
                p.abort_transaction(CALL_TIMEOUT_S)
                aborted = len(msgs)
                for q, off in first.items():
                    c.seek(TopicPartition(src, q, off))  # redo the batch
                return
            p.commit_transaction(CALL_TIMEOUT_S)

        wait_until(caught_up, 60, "the input consumed and committed", step=step)
        assert aborted > 0, "a transaction was aborted midway"
        committed = {tp.partition: tp.offset for tp in c.committed(
            [TopicPartition(src, q) for q in range(PARTITIONS)], timeout=CALL_TIMEOUT_S)}
    finally:
        close_quietly(c)

    out = read_count(target, dst, "read_committed", k)
    assert sorted(out) == sorted(f"t-v{i}" for i in range(k)), "every input exactly once in the output"
    everything = read_count(target, dst, "read_uncommitted", k + aborted)
    assert len(everything) == k + aborted, "the aborted batch is in the log, as aborted data"
    want = {q: in_ends[q] for q in range(PARTITIONS) if in_ends[q] > 0}
    assert {q: o for q, o in committed.items() if o >= 0} == want, "committed offsets = input end offsets"


def test_second_producer_fences_the_first(target):
    tag = uuid.uuid4().hex[:8]
    topic, txn_id = f"txn-fence-{tag}", f"tx-fence-{tag}"
    admin = confluent_admin(target)
    assert confluent_create(admin, topic, PARTITIONS) is None

    zombie = txn_producer(target, txn_id)
    zombie.init_transactions(INIT_TIMEOUT_S)
    zombie.begin_transaction()
    zombie.produce(topic, key="k1", value="zombie-1")
    assert zombie.flush(CALL_TIMEOUT_S) == 0

    fresh = txn_producer(target, txn_id)
    fresh.init_transactions(INIT_TIMEOUT_S)  # bumps the epoch and aborts the zombie's open transaction

    def outcome(call):
        try:
            call()
            return "ok"
        except KafkaException as e:
            err = e.args[0]
            logging.getLogger(__name__).warning("fenced producer on %s: %s", target.bootstrap, err)
            return err.name(), err.fatal()

    zombie.produce(topic, key="k1", value="zombie-2")
    seen = {"flush": outcome(lambda: zombie.flush(CALL_TIMEOUT_S)),
            "commit": outcome(lambda: zombie.commit_transaction(CALL_TIMEOUT_S))}
    assert seen == FENCED

    fresh.begin_transaction()
    fresh.produce(topic, key="k1", value="fresh-1")
    fresh.commit_transaction(CALL_TIMEOUT_S)

    assert read_count(target, topic, "read_committed", 1) == ["fresh-1"]
    assert sorted(read_count(target, topic, "read_uncommitted", 2)) == ["fresh-1", "zombie-1"]
