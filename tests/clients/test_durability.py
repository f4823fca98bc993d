"""Reference §10 Example 4 with real clients: committed offsets and group state survive kill -9.

A confluent-kafka (librdkafka) classic-protocol consumer joins `g-classic`, owns orders[0..5] and
commits known offsets (10, 9, 13, 6, 14, 8 — the seed's values). The broker is killed with
SIGKILL (no shutdown path runs), started again on the same data directory and port, and then:

* the broker logged one `loaded __consumer_offsets-<p>` line per partition, the group's partition
  (18, as in the seed) with records > 0, and no torn-tail truncation;
* a new consumer of the same group (not subscribed, so it does not disturb the group) reads the
  same offsets with `committed()`, and AdminClient `list_consumer_group_offsets` agrees;
* the group itself was rebuilt from the log: Stable, with the same member id and assignment;
* `ringleader dump-log --verify` finds the partition directory clean.

The KIP-848 half of Example 4 (a `consumer`-protocol group) waits for ConsumerGroupHeartbeat.
"""

from __future__ import annotations

import re
import signal
import subprocess

from confluent_kafka import ConsumerGroupState, ConsumerGroupTopicPartitions, TopicPartition

import harness
from harness import (CALL_TIMEOUT_S, binary_path, broker_env, confluent_admin, confluent_consumer,
                     confluent_create, wait_until)

GROUP = "g-classic"
TOPIC = "orders"
COMMITTED = {0: 10, 1: 9, 2: 13, 3: 6, 4: 14, 5: 8}
OFFSETS_PARTITIONS = 50


def partition_for(group: str, partitions: int = OFFSETS_PARTITIONS) -> int:
    """Kafka's group → __consumer_offsets partition: Java String.hashCode, Utils.abs, modulo."""
    h = 0
    units = group.encode("utf-16-be")
    for i in range(0, len(units), 2):
        h = (31 * h + int.from_bytes(units[i:i + 2], "big")) & 0xFFFFFFFF
    if h >= 1 << 31:
        h -= 1 << 32
    return (0 if h == -(1 << 31) else abs(h)) % partitions


def kill9(broker) -> None:
    """SIGKILL the broker process and check that is how it ended."""
    assert broker.alive(), "broker not running"
    broker.proc.send_signal(signal.SIGKILL)
    broker.proc.wait(timeout=10)
    assert broker.proc.returncode == -signal.SIGKILL, broker.proc.returncode


def last_start_log(broker) -> str:
    """The broker log since its most recent start (harness writes a `===== start #N` marker)."""
    text = broker.log_text()
    return text[text.rfind("===== start #"):]


def committed(consumer) -> dict[int, int]:
    return harness.committed(consumer, TOPIC, COMMITTED)


def admin_offsets(admin) -> dict[int, int]:
    fs = admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions(GROUP)], request_timeout=15)
    out = fs[GROUP].result(timeout=CALL_TIMEOUT_S)
    for tp in out.topic_partitions:
        assert tp.error is None, tp
    return {tp.partition: tp.offset for tp in out.topic_partitions if tp.topic == TOPIC}


def describe(admin):
    return admin.describe_consumer_groups([GROUP], request_timeout=15)[GROUP].result(timeout=CALL_TIMEOUT_S)


def test_partition_hash_matches_the_seed():
    assert partition_for("g-classic") == 18
    assert partition_for("g-consumer") == 32


def test_committed_offsets_and_group_survive_kill_9(start_broker):
    broker = start_broker("group.initial.rebalance.delay.ms=0")
    admin = confluent_admin(broker)
    assert confluent_create(admin, TOPIC, partitions=6) is None

    a = confluent_consumer(broker, GROUP, client_id="example4-A")
    b = None
    try:
        a.subscribe([TOPIC])
        wait_until(lambda: sorted(tp.partition for tp in a.assignment()) == list(COMMITTED), 30,
                   "A owns orders[0..5]", step=lambda: a.poll(0.1))
        a.commit(offsets=[TopicPartition(TOPIC, p, o) for p, o in COMMITTED.items()], asynchronous=False)
        assert committed(a) == COMMITTED
        member_id = a.memberid()
        assert member_id, "A has a member id"
        before = describe(admin)
        assert before.state == ConsumerGroupState.STABLE
        assert [m.member_id for m in before.members] == [member_id]

        kill9(broker)
        broker.start()  # same port and data dir; waits for "listening on"

        log = last_start_log(broker)
        loads = re.findall(r"loaded __consumer_offsets-(\d+)\b.*?records=(\d+)", log)
        assert len(loads) == OFFSETS_PARTITIONS, log
        records = {int(p): int(n) for p, n in loads}
        p = partition_for(GROUP)
        assert records[p] > 0, f"__consumer_offsets-{p} loaded no records:\n{log}"
        # One GroupMetadata record at least, plus the six commits.
        assert records[p] >= 7, records[p]
        assert "truncated a torn or corrupt log tail" not in log, log

        # The group state was rebuilt from the log, not re-created by A rejoining. A fresh admin client: the
        # first one saw its connections refused while the broker was down and may sit in librdkafka's reconnect
        # backoff (up to reconnect.backoff.max.ms, 10 s) past the describe's timeout (seen in CI).
        admin = confluent_admin(broker)
        after = describe(admin)
        assert after.state == ConsumerGroupState.STABLE, after.state
        assert [m.member_id for m in after.members] == [member_id]
        assert sorted(tp.partition for tp in after.members[0].assignment.topic_partitions) == list(COMMITTED)

        # A new consumer of the same group (not subscribed: it only fetches offsets).
        b = confluent_consumer(broker, GROUP, client_id="example4-B")
        assert committed(b) == COMMITTED
        assert admin_offsets(confluent_admin(broker)) == COMMITTED

        # A keeps its place: still the same member, still owning everything, offsets unchanged.
        for _ in range(10):
            a.poll(0.1)
        assert sorted(tp.partition for tp in a.assignment()) == list(COMMITTED)
        assert a.memberid() == member_id
        assert committed(a) == COMMITTED

        # The segment files are clean and hold the group's records in Kafka's format.
        pdir = broker.data_dir / f"__consumer_offsets-{p}"
        run = subprocess.run([str(binary_path()), "dump-log", str(pdir), "--verify"], capture_output=True,
                             text=True, timeout=30, env=broker_env())
        assert run.returncode == 0 and run.stdout.startswith("OK: "), run.stdout + run.stderr
        run = subprocess.run([str(binary_path()), "dump-log", str(pdir)], capture_output=True, text=True,
                             timeout=30, env=broker_env())
        assert run.returncode == 0, run.stderr
        assert f'"memberId":"{member_id}"' in run.stdout, run.stdout
        assert ('key: {"type":"1","data":{"group":"g-classic","topic":"orders","partition":4}} '
                'payload: {"version":"4","data":{"offset":14,') in run.stdout, run.stdout
    finally:
        if b is not None:
            b.close()
        a.close()
