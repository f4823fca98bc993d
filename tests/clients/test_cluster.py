"""Three Ringleader nodes on loopback, `__consumer_offsets` replicated by Raft, with real clients.

Each node is a `ringleader serve` process with its own data directory, client port and
node-to-node port, all three given the same `controller.quorum.voters` and `cluster.id`
(docs/replication.md). What is checked, with confluent-kafka (librdkafka):

* FindCoordinator on any node names the leader of the group's partition, and a commit made
  through it is answered once a majority holds it;
* the coordinator's node is killed with SIGKILL, round after round (another node each time the
  leadership moves): every commit acknowledged before a kill is still the committed offset
  afterwards, the group answers again on a new coordinator, and the time from the kill to the
  first acknowledged commit is reported (p50 / max);
* after the rounds every node is up again and a fresh consumer reads the last acknowledged
  offset whichever node coordinates;
* a classic member (librdkafka, subscribed) keeps its member id and partitions through kills;
* the coordinator's node cut off from its peers (a failpoint drops its Raft messages while its
  clients still reach it): its last OffsetFetch answer comes before any other node's first one,
  so two coordinators never answer at once (the leader lease, docs/replication.md).

* the topics are one registry, the cluster's metadata log: a topic created, grown or deleted
  through any node is the same (name, id, partitions) on every node, a second create of a name
  fails on any node, and changes go on through a follower while the log's leader is dead; a
  restarted node catches up.

* log compaction (a separate cluster whose replicas snapshot every 8 KiB over 16 KiB segments):
  the live nodes' old segments go, a node that was down while they compacted installs the
  leader's snapshot, and every acknowledged commit survives coordinator kills after it.

* a topic of replication factor 1: each partition lives on the node the metadata log placed it
  on: every node names the same leaders, a client bootstrapped anywhere reads what another
  produced, a node asked for another's partition answers NOT_LEADER_OR_FOLLOWER, and a dead
  node's partitions have no leader until it is back.

* a topic of replication factor 3 (a Raft group per partition over the three nodes): an
  idempotent acks=all producer rides through SIGKILLs of partition 0's leader, every
  acknowledged record is read back once at its offset, the Raft logs compact, and the three
  nodes' topic logs end byte for byte the same; factor 4 is refused; DeleteRecords moves
  every replica's log start, which a whole-cluster restart keeps.

* a topic of replication factor 2 on three nodes (a Raft group of two per partition, striped):
  every node's own Metadata names the same two replicas and leader, only those two have the
  partition on disk, the node outside a set names its leader, and none while it is down; a
  removed node's replicas move to the node left, which catches up to the leader's bytes.

Rounds: `RINGLEADER_FAILOVER_ROUNDS` (5 in the suite; `scripts/failover.sh` runs many more).
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import statistics
import struct
import time

import pytest
from confluent_kafka import Consumer, KafkaException, TopicPartition

from kafka_ref import kafka_tool, log_dirs, offsets_partition
from harness import (Broker, BrokerError, Reader, confluent_admin, confluent_create, confluent_topic_ids,
                     confluent_topics, connect, free_port, kstring, recv_frame, request_frame, wait_until)

TOPIC = "orders"
GROUP = "failover"
ROUNDS = int(os.environ.get("RINGLEADER_FAILOVER_ROUNDS", "5"))
CLUSTER_ID = "ringleader-test-cluster"
SNAPSHOT_BYTES = 8192
SEGMENT_BYTES = 16384
log = logging.getLogger(__name__)


def start_cluster(tmp_path, extra_sets=(), start=True):
    # Six distinct ports, chosen together: three client listeners, three node-to-node ones.
    ports = []
    while len(ports) < 6:
        p = free_port()
        if p not in ports:
            ports.append(p)
    client_ports, voter_ports = ports[:3], ports[3:]
    voters = ",".join(f"{i + 1}@127.0.0.1:{p}" for i, p in enumerate(voter_ports))
    nodes = []
    for i in range(3):
        b = Broker(data_dir=tmp_path / f"node{i + 1}", log_path=tmp_path / f"node{i + 1}.log",
                   port=client_ports[i], sets=[f"node.id={i + 1}", f"controller.quorum.voters={voters}",
                         f"cluster.id={CLUSTER_ID}", *extra_sets])
        nodes.append(b)
    # Started together: the ports were chosen free just now, and a node that cannot bind its
    # voter port refuses to start (a retry would not help: its peers know that port).
    if start:
        for b in nodes:
            b.start()
    return nodes


@pytest.fixture
def cluster(tmp_path, monkeypatch):
    # Every node reads the isolation failpoint's directory (see engine/src/runtime/peers.rs).
    monkeypatch.setenv("RINGLEADER_FAILPOINT_ISOLATE_DIR", str(tmp_path))
    nodes = start_cluster(tmp_path)
    yield nodes
    for b in nodes:
        b.kill()


@pytest.fixture
def compacting_cluster(tmp_path, monkeypatch):
    """Three nodes whose `__consumer_offsets` replicas snapshot every few KiB of entries, over
    small segments, so compaction, segment removal and snapshot installs happen within seconds
    (docs/replication.md, "Log compaction")."""
    monkeypatch.setenv("RINGLEADER_TEST_RAFT_SNAPSHOT_BYTES", str(SNAPSHOT_BYTES))
    nodes = start_cluster(tmp_path, [f"offsets.topic.segment.bytes={SEGMENT_BYTES}"])
    yield nodes
    for b in nodes:
        b.kill()


def create_topic(nodes, name: str, partitions: int, via: int = 0, replication_factor: int = 1,
                 config: dict | None = None) -> float:
    """Create `name` through node `via` and wait until every live node shows the same topic id
    and partition count; returns the seconds the create took. Right after start the metadata log
    may have no leader yet (the node waits for one, up to its deadline): REQUEST_TIMED_OUT is retried (a create that applied late then reads
    TOPIC_ALREADY_EXISTS, which is accepted only after a retry)."""
    from confluent_kafka import KafkaError

    admin = confluent_admin(nodes[via])
    start = time.monotonic()
    retried = False
    while True:
        err = confluent_create(admin, name, partitions=partitions,
                               replication_factor=replication_factor, config=config)
        if err is None or (retried and err.code() == KafkaError.TOPIC_ALREADY_EXISTS):
            break
        assert ((err.retriable() or err.code() == KafkaError.REQUEST_TIMED_OUT)
                and time.monotonic() - start < 60), f"create {name}: {err}"
        retried = True
        time.sleep(0.2)
    took = time.monotonic() - start
    wait_same_topic(nodes, name, partitions)
    return took


def wait_same_topic(nodes, name: str, partitions: int | None) -> str | None:
    """Wait until every live node shows `name` with one id and `partitions` partitions (None:
    the topic is gone everywhere); returns the id."""
    deadline = time.monotonic() + 30
    while True:
        seen = {}
        for i, n in enumerate(nodes):
            if not n.alive():
                continue
            admin = confluent_admin(n)
            topics = confluent_topics(admin)
            if name not in topics or topics[name].error is not None:
                seen[i + 1] = None
            else:
                seen[i + 1] = confluent_topic_ids(admin, [name])[name]
        want_gone = partitions is None
        if want_gone and all(v is None for v in seen.values()):
            return None
        ids = {v[0] for v in seen.values() if v is not None}
        if (not want_gone and len(ids) == 1 and all(v is not None and v[1] == partitions
                                                     for v in seen.values())):
            return ids.pop()
        assert time.monotonic() < deadline, f"{name}: nodes disagree: {seen}"
        time.sleep(0.1)


def consumer(bootstrap: str) -> Consumer:
    return Consumer({
        "bootstrap.servers": bootstrap,
        "group.id": GROUP,
        "enable.auto.commit": False,
        "logger": logging.getLogger("librdkafka"),
        "broker.address.family": "v4",
        "socket.timeout.ms": 5000,
        "socket.connection.setup.timeout.ms": 2000,
        "reconnect.backoff.max.ms": 500,
        "topic.metadata.refresh.interval.ms": 1000,
    })


def commit_until_acked(c: Consumer, offset: int, timeout: float = 30.0) -> float:
    """Commit `offset` until the coordinator acknowledges it; returns when it did."""
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        try:
            out = c.commit(offsets=[TopicPartition(TOPIC, 0, offset)], asynchronous=False)
            assert out[0].error is None, out[0].error
            return time.monotonic()
        except KafkaException as e:
            last = e.args[0]
            assert last.retriable() or last.code() in (
                # librdkafka's own codes while it has no coordinator or connection
                -185, -187, -195, -180, 14, 15, 16), f"commit {offset}: {last}"
            time.sleep(0.05)
    raise AssertionError(f"commit {offset} not acknowledged within {timeout}s (last error {last})")


def committed(bootstrap: str) -> int:
    c = consumer(bootstrap)
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                return c.committed([TopicPartition(TOPIC, 0)], timeout=10)[0].offset
            except KafkaException:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.1)
    finally:
        c.close()


def coordinator(nodes) -> int:
    """The node id FindCoordinator names for the group (asked of a live node)."""
    live = [n for n in nodes if n.alive()]
    admin = confluent_admin(live[0], **{"bootstrap.servers": ",".join(n.bootstrap for n in live)})
    deadline = time.monotonic() + 30
    while True:
        try:
            return admin.describe_consumer_groups([GROUP])[GROUP].result(timeout=10).coordinator.id
        except KafkaException:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.1)


def test_commits_survive_killing_the_coordinator(cluster):
    nodes = cluster
    bootstrap = ",".join(n.bootstrap for n in nodes)
    create_topic(nodes, TOPIC, 1)

    c = consumer(bootstrap)
    acked = 0
    recovery = []
    coordinators = []
    for r in range(ROUNDS):
        for _ in range(5):
            acked += 1
            commit_until_acked(c, acked)
        leader = coordinator(nodes)
        coordinators.append(leader)
        victim = nodes[leader - 1]
        victim.kill()
        killed_at = time.monotonic()
        acked += 1
        recovery.append(commit_until_acked(c, acked) - killed_at)
        # The acknowledged commits are on the two live nodes: a fresh client reads the last one.
        assert committed(bootstrap) == acked, f"round {r}: after killing node {leader}"
        new_leader = coordinator(nodes)
        assert new_leader != leader, f"round {r}: node {leader} is dead but still named coordinator"
        victim.start()
    c.close()

    # Every node is up: the last acknowledged commit is what the group has, and it survives
    # a kill of whichever node coordinates now.
    assert committed(bootstrap) == acked
    leader = coordinator(nodes)
    nodes[leader - 1].kill()
    assert committed(bootstrap) == acked
    nodes[leader - 1].start()

    p50 = statistics.median(recovery)
    log.warning("failover rounds=%d coordinators=%s kill-to-commit p50=%.0f ms max=%.0f ms",
                ROUNDS, coordinators, p50 * 1000, max(recovery) * 1000)
    assert max(recovery) < 30


def raft_snapshot(node: Broker, partition: int) -> int | None:
    """The index of the Raft snapshot a node's replica of __consumer_offsets-<partition> holds
    (storage/src/raft_log.rs's `raft-snapshot`: magic, version 2, then the index), None if none."""
    path = node.data_dir / f"__consumer_offsets-{partition}" / "raft-snapshot"
    try:
        head = path.read_bytes()[:13]
    except FileNotFoundError:
        return None
    assert head[:5] == b"RLSN\x02", head
    return int.from_bytes(head[5:13], "big")


def segments(node: Broker, partition: int) -> list[int]:
    d = node.data_dir / f"__consumer_offsets-{partition}"
    return sorted(int(p.stem) for p in d.glob("*.log"))


def test_a_node_down_while_the_others_compact_catches_up_by_snapshot(compacting_cluster):
    nodes = compacting_cluster
    bootstrap = ",".join(n.bootstrap for n in nodes)
    create_topic(nodes, TOPIC, 1)
    p = offsets_partition(GROUP)
    c = consumer(bootstrap)
    acked = 0
    for _ in range(20):
        acked += 1
        commit_until_acked(c, acked)
    leader = coordinator(nodes)
    behind = next(i for i in (1, 2, 3) if i != leader)
    nodes[behind - 1].kill()
    had = raft_snapshot(nodes[behind - 1], p) or 0

    # Enough commits for several snapshots on the two live nodes, each removing the segments
    # it covers: the node that is down falls behind what their logs still hold.
    def compacted_past_behind():
        snaps = [raft_snapshot(nodes[i - 1], p) or 0 for i in (1, 2, 3) if i != behind]
        return min(snaps) > had + 50

    live = nodes[leader - 1]
    while not (compacted_past_behind() and segments(live, p)[0] > 0):
        acked += 1
        commit_until_acked(c, acked)
        assert acked < 5000, f"the live nodes never compacted their logs: {segments(live, p)}"
    # Segments go as snapshots cover them: a few remain, whatever the number of commits.
    for _ in range(300):
        acked += 1
        commit_until_acked(c, acked)
    segs = segments(live, p)
    assert len(segs) <= 4, f"node {leader} keeps {len(segs)} segments of {SEGMENT_BYTES} bytes"

    # Back up: its log ends before the others' first entry, so only the snapshot helps.
    nodes[behind - 1].start()
    wait_until(lambda: (raft_snapshot(nodes[behind - 1], p) or 0) > had + 50, 30,
               f"node {behind} installed the leader's snapshot")
    assert any("raft snapshot from the leader installed" in line and f"partition={p} " in line
               for line in nodes[behind - 1].log_text().splitlines()), nodes[behind - 1].log_tail()
    for _ in range(5):
        acked += 1
        commit_until_acked(c, acked)
    assert committed(bootstrap) == acked

    # Coordinator kills, each restarted node reopening from its snapshot: every acknowledged
    # commit stays, whoever leads next (the node that caught up by snapshot among them).
    for r in range(3):
        leader = coordinator(nodes)
        nodes[leader - 1].kill()
        acked += 1
        commit_until_acked(c, acked)
        assert committed(bootstrap) == acked, f"round {r}: after killing node {leader}"
        nodes[leader - 1].start()
    c.close()
    for n in nodes:
        assert "panicked" not in n.log_text(), n.log_tail()


def test_a_subscribed_consumer_keeps_its_group_through_coordinator_kills(cluster):
    """A classic-protocol member (librdkafka) keeps its member id and its three partitions while
    its coordinator's node is killed: the new coordinator loads the group from the replicated log
    (members and assignment, as Kafka's loader does), the member's next heartbeat is accepted,
    and its commits (at its generation) go on being acknowledged."""
    from confluent_kafka import ConsumerGroupState

    nodes = cluster
    bootstrap = ",".join(n.bootstrap for n in nodes)
    create_topic(nodes, TOPIC, 3)
    c = consumer(bootstrap)
    c.subscribe([TOPIC])
    deadline = time.monotonic() + 30
    while len(c.assignment()) < 3:
        assert time.monotonic() < deadline, "never assigned the topic's 3 partitions"
        c.poll(0.1)
    member = c.memberid()
    generation = None

    def describe():
        live = [n for n in nodes if n.alive()]
        admin = confluent_admin(live[0], **{"bootstrap.servers": ",".join(n.bootstrap for n in live)})
        return admin.describe_consumer_groups([GROUP])[GROUP].result(timeout=10)

    offset = 0
    for r in range(min(ROUNDS, 3)):
        offset += 1
        deadline = time.monotonic() + 30
        while True:
            c.poll(0.05)
            try:
                c.commit(offsets=[TopicPartition(TOPIC, p, offset) for p in range(3)], asynchronous=False)
                break
            except KafkaException as e:
                assert e.args[0].retriable() or e.args[0].code() in (-185, -187, -195, -180, 14, 15, 16, 27, 22), e
                assert time.monotonic() < deadline, f"round {r}: commit {offset} never acknowledged: {e}"
        leader = coordinator(nodes)
        nodes[leader - 1].kill()
        # The member goes on: a commit at its generation is acknowledged by the new coordinator.
        offset += 1
        deadline = time.monotonic() + 30
        while True:
            c.poll(0.05)
            try:
                c.commit(offsets=[TopicPartition(TOPIC, p, offset) for p in range(3)], asynchronous=False)
                break
            except KafkaException as e:
                assert time.monotonic() < deadline, f"round {r}: no commit after the kill: {e}"
        assert c.memberid() == member, f"round {r}: the member rejoined as {c.memberid()}"
        assert len(c.assignment()) == 3
        d = describe()
        assert d.state == ConsumerGroupState.STABLE, d.state
        assert [m.member_id for m in d.members] == [member]
        assert d.coordinator.id != leader
        nodes[leader - 1].start()
    c.close()
    assert committed(bootstrap) == offset


def offset_fetch(sock, correlation_id: int) -> tuple[int, int | None]:
    """OffsetFetch v3 of GROUP, every topic, on `sock`: (error code, committed offset of
    TOPIC-0 or None)."""
    sock.sendall(request_frame(9, 3, correlation_id, kstring(GROUP) + b"\xff\xff\xff\xff"))
    r = Reader(recv_frame(sock))
    assert r.take(">i") == correlation_id
    r.take(">i")  # throttle_time_ms
    found = None
    for _ in range(r.take(">i")):
        name = r.string()
        for _ in range(r.take(">i")):
            partition, offset = r.take(">iq")
            r.string()
            err = r.take(">h")
            if name == TOPIC and partition == 0 and err == 0:
                found = offset
    return r.take(">h"), found


def test_an_isolated_coordinator_stops_answering_before_another_starts(cluster, tmp_path):
    nodes = cluster
    bootstrap = ",".join(n.bootstrap for n in nodes)
    create_topic(nodes, TOPIC, 1)
    c = consumer(bootstrap)
    commit_until_acked(c, 5)
    c.close()
    leader = coordinator(nodes)
    socks = {i + 1: connect(n.bootstrap) for i, n in enumerate(nodes)}
    cid = 0

    def fetch(node):
        nonlocal cid
        cid += 1
        return offset_fetch(socks[node], cid)

    assert fetch(leader) == (0, 5)
    (tmp_path / f"isolate-{leader}").touch()
    cut_at = time.monotonic()
    old_answers, new_answers = [], []  # (time, node) of every successful answer after the cut
    deadline = cut_at + 15
    while time.monotonic() < deadline:
        for node in socks:
            err, offset = fetch(node)
            t = time.monotonic()
            if err == 0:
                assert offset == 5, f"node {node} answered offset {offset}"
                (old_answers if node == leader else new_answers).append((t, node))
            else:
                # NOT_COORDINATOR, or COORDINATOR_LOAD_IN_PROGRESS while a new leader loads
                assert err in (14, 16), f"node {node}: error {err}"
        if new_answers and t - new_answers[0][0] > 1:
            break
    assert old_answers, "the isolated leader never answered after the cut: the lease was not exercised"
    assert new_answers, "no other node became coordinator within 15 s"
    last_old, first_new = old_answers[-1][0], new_answers[0][0]
    log.warning("isolated leader %d answered until %.0f ms after the cut; node %d from %.0f ms",
                leader, (last_old - cut_at) * 1000, new_answers[0][1], (first_new - cut_at) * 1000)
    assert last_old < first_new, (
        f"split brain: node {leader} answered at {last_old - cut_at:.3f}s, after node "
        f"{new_answers[0][1]} started at {first_new - cut_at:.3f}s")
    # And by a margin: the lease ends 2 ticks (200 ms) before a follower that heard from the
    # leader may vote, less up to a tick of phase between two nodes' clocks. Without the lease
    # check the old leader answered until 1-46 ms before the new one (it stops only when
    # check_quorum steps it down, about when the followers may vote).
    assert first_new - last_old > 0.05, (
        f"node {leader} answered until {(first_new - last_old) * 1000:.0f} ms before node "
        f"{new_answers[0][1]} started: the lease did not end it early")
    assert len({n for _, n in new_answers}) == 1, f"two new coordinators: {new_answers}"
    # Healed: the old leader rejoins as a follower and the group keeps its commit.
    (tmp_path / f"isolate-{leader}").unlink()
    for s in socks.values():
        s.close()
    c = consumer(bootstrap)
    commit_until_acked(c, 6)
    c.close()
    assert committed(bootstrap) == 6


def test_topics_are_one_registry_across_the_nodes(cluster):
    from confluent_kafka import KafkaError
    from confluent_kafka.admin import NewPartitions

    nodes = cluster
    # Created through a follower of the metadata log (node 1 stands for its election first).
    took = create_topic(nodes, "shared", 3, via=1)
    log.info("create through node 2: %.3f s", took)
    first_id = wait_same_topic(nodes, "shared", 3)
    # The name is taken on every node.
    for n in nodes:
        err = confluent_create(confluent_admin(n), "shared", partitions=1)
        assert err is not None and err.code() == KafkaError.TOPIC_ALREADY_EXISTS, err
    # Grown through node 3, seen by all with the same id.
    admin3 = confluent_admin(nodes[2])
    admin3.create_partitions([NewPartitions("shared", 5)])["shared"].result(timeout=30)
    assert wait_same_topic(nodes, "shared", 5) == first_id
    # Deleted through node 1, gone from all.
    admin1 = confluent_admin(nodes[0])
    admin1.delete_topics(["shared"], operation_timeout=20)["shared"].result(timeout=30)
    wait_same_topic(nodes, "shared", None)
    # The metadata log's leader dies: changes go on through the others (after an election), and
    # the dead node catches up when it is back.
    leader = metadata_leader(nodes)
    nodes[leader - 1].kill()
    via = leader % 3  # another node's index
    took = create_topic(nodes, "after-kill", 2, via=via)
    log.info("create through node %d after killing the metadata leader %d: %.3f s", via + 1, leader, took)
    assert took < 20, f"a create took {took:.1f} s after the leader died"
    after_id = wait_same_topic(nodes, "after-kill", 2)
    assert metadata_leader(nodes) != leader
    nodes[leader - 1].start()
    assert wait_same_topic(nodes, "after-kill", 2) == after_id
    # Recreating a deleted name gives a new id.
    create_topic(nodes, "shared", 1, via=leader - 1)
    assert wait_same_topic(nodes, "shared", 1) != first_id


def metadata_leader(nodes) -> int:
    """The metadata log's leader as the live nodes last logged it (engine/src/runtime/metadata_log.rs
    logs every change it sees): the most recent `leader=Some(N)` line of any live node."""
    import re

    best = ("", None)
    for n in nodes:
        if not n.alive():
            continue
        for line in n.log_text().splitlines():
            m = re.match(r"(\S+) .*metadata log: leader leader=Some\((\d+)\)", line)
            if m and m.group(1) > best[0]:
                best = (m.group(1), int(m.group(2)))
    assert best[1] is not None, "no node logged a metadata log leader"
    return best[1]


def partition_leaders(node, name: str, isr: bool = False) -> dict[int, tuple]:
    """partition -> (leader id, error or None[, ISR]) as `node`'s Metadata tells it."""
    md = confluent_admin(node).list_topics(topic=name, timeout=10)
    return {p.id: (p.leader, p.error) + ((list(p.isrs),) if isr else ())
            for p in md.topics[name].partitions.values()}


def list_offsets_v1(node, name: str, partition: int) -> tuple[int, int]:
    """ListOffsets v1 (latest) for one partition, sent to `node` itself: (error code, offset)."""
    import struct

    body = (struct.pack(">i", -1) + struct.pack(">i", 1) + kstring(name)
            + struct.pack(">i", 1) + struct.pack(">iq", partition, -1))
    with connect(node.bootstrap) as s:
        s.sendall(request_frame(2, 1, 7, body))
        r = Reader(recv_frame(s))
    assert r.take(">i") == 7
    assert r.take(">i") == 1 and r.string() == name
    assert r.take(">i") == 1
    p, err, _ts, offset = r.take(">ihqq")
    assert p == partition
    return err, offset


def read_all(node, name: str, partitions: int, want: int, timeout: float = 30.0,
             only: list[int] | None = None) -> list[bytes]:
    """Every record value of `name` (of partitions `only`, else all), read through a consumer
    bootstrapped at `node` only."""
    from confluent_kafka import OFFSET_BEGINNING

    c = Consumer({"bootstrap.servers": node.bootstrap, "group.id": f"reader-{node.port}",
                  "enable.auto.commit": False, "logger": logging.getLogger("librdkafka"),
                  "broker.address.family": "v4", "topic.metadata.refresh.interval.ms": 1000})
    try:
        c.assign([TopicPartition(name, p, OFFSET_BEGINNING)
                  for p in (range(partitions) if only is None else only)])
        got: list[bytes] = []
        deadline = time.monotonic() + timeout
        while len(got) < want and time.monotonic() < deadline:
            m = c.poll(0.2)
            if m is not None and m.error() is None:
                got.append(m.value())
        return got
    finally:
        c.close()


def test_each_partition_lives_on_the_node_the_metadata_log_placed_it_on(cluster):
    """Replication factor 1: each partition has one replica, the node the metadata log placed
    it on. Every node names the same leaders, spread over the nodes; a client
    bootstrapped at any node reads what one bootstrapped at another produced; a node asked for a
    partition it does not hold answers NOT_LEADER_OR_FOLLOWER; while a node is down its
    partitions have no leader and the others go on; its records are there when it is back."""
    from confluent_kafka import KafkaError, Producer

    nodes = cluster
    name, partitions = "placed", 6
    create_topic(nodes, name, partitions)
    # Every node names the same leader for each partition once it sees its peers connected.
    deadline = time.monotonic() + 30
    while True:
        views = [partition_leaders(n, name) for n in nodes]
        if all(v == views[0] for v in views) and all(e is None for _, e in views[0].values()):
            break
        assert time.monotonic() < deadline, f"nodes disagree on leaders: {views}"
        time.sleep(0.2)
    leaders = {p: l for p, (l, _) in views[0].items()}
    assert sorted(leaders) == list(range(partitions))
    assert sorted(set(leaders.values())) == [1, 2, 3], f"leaders not spread: {leaders}"

    # A node asked directly for a partition placed elsewhere refuses it.
    for p, l in leaders.items():
        for i, n in enumerate(nodes):
            err, offset = list_offsets_v1(n, name, p)
            if i + 1 == l:
                assert (err, offset) == (0, 0), (p, l, err, offset)
            else:
                assert err == 6, f"partition {p} (leader {l}) asked of node {i + 1}: error {err}"

    # Produced through node 1's bootstrap, read through node 2's and node 3's.
    delivered = []
    prod = Producer({"bootstrap.servers": nodes[0].bootstrap, "acks": "all", "enable.idempotence": True,
                     "logger": logging.getLogger("librdkafka"), "broker.address.family": "v4"})
    for i in range(60):
        prod.produce(name, value=f"r{i}".encode(), partition=i % partitions,
                     on_delivery=lambda err, msg: delivered.append(err))
    assert prod.flush(30) == 0
    assert delivered == [None] * 60, delivered
    want = sorted(f"r{i}".encode() for i in range(60))
    for i, n in enumerate(nodes[1:], start=2):
        assert sorted(read_all(n, name, partitions, 60)) == want, f"read through node {i}"

    # Node 3 down: its partitions have no leader on the others, the rest take records.
    nodes[2].kill()
    down = sorted(p for p, l in leaders.items() if l == 3)
    deadline = time.monotonic() + 20
    while True:
        view = partition_leaders(nodes[0], name)
        if all(view[p][0] == -1 and view[p][1] is not None
               and view[p][1].code() == KafkaError.LEADER_NOT_AVAILABLE for p in down):
            break
        assert time.monotonic() < deadline, f"node 3's partitions {down} still led: {view}"
        time.sleep(0.2)
    assert all(view[p] == (leaders[p], None) for p in leaders if p not in down), view
    # As Kafka 4.4 reports a partition whose only replica is fenced: no leader, an empty ISR.
    assert all(partition_leaders(nodes[0], name, isr=True)[p][2] == [] for p in down)
    up = [p for p in range(partitions) if p not in down]
    more = []
    for i, p in enumerate(up):
        prod.produce(name, value=f"later{i}".encode(), partition=p,
                     on_delivery=lambda err, msg: more.append(err))
    assert prod.flush(30) == 0
    assert more == [None] * len(up), more

    # Back: every record, old and new, is there.
    nodes[2].start()
    want = sorted(want + [f"later{i}".encode() for i in range(len(up))])
    assert sorted(read_all(nodes[0], name, partitions, len(want))) == want
    prod.flush(5)

    # Kafka's kafka-log-dirs (DescribeLogDirs to every node): each node lists the logs it holds, so each
    # partition once, on the node it was placed on, with its records' bytes.
    out = log_dirs(nodes[0].bootstrap, "--topic-list", name)
    seen = {b["broker"]: sorted(p["partition"] for d in b["logDirs"] for p in d["partitions"])
            for b in out["brokers"]}
    assert seen == {n: sorted(f"{name}-{p}" for p, l in leaders.items() if l == n) for n in (1, 2, 3)}, seen
    assert all(p["size"] > 0 for b in out["brokers"] for d in b["logDirs"] for p in d["partitions"]), out

    # Deleted through node 2: every node removes the partitions it held as it applies the deletion.
    held = {i + 1: sorted(d.name for d in n.data_dir.glob(f"{name}-*")) for i, n in enumerate(nodes)}
    assert all(held.values()), f"every node holds some of {name}'s partitions: {held}"
    admin2 = confluent_admin(nodes[1])
    admin2.delete_topics([name], operation_timeout=20)[name].result(timeout=30)
    wait_until(lambda: not any(list(n.data_dir.glob(f"{name}-*")) for n in nodes), 20,
               f"{name}'s directories removed on every node")


def replicated_settled(nodes, name: str) -> bool:
    """An admin bootstrapped at each node in turn names a leader, no error and the full ISR for every
    partition of `name` (librdkafka sends the Metadata request to a broker of its choosing, so this
    is not each node's own view)."""
    try:
        views = [partition_leaders(n, name, isr=True) for n in nodes]
    except Exception:  # a node still starting, or the topic not there yet
        return False
    return all(l in (1, 2, 3) and e is None and sorted(isr) == [1, 2, 3]
               for v in views for l, e, isr in v.values())


def produce_acked(nodes, name: str, values: list[bytes], partitions: int) -> None:
    """Produce `values` round robin over the partitions (idempotent, acks=all); every one acknowledged."""
    from confluent_kafka import Producer

    errors = []
    prod = Producer({"bootstrap.servers": ",".join(n.bootstrap for n in nodes if n.alive()),
                     "acks": "all", "enable.idempotence": True, "message.timeout.ms": 30000,
                     "logger": logging.getLogger("librdkafka"), "broker.address.family": "v4"})
    for i, v in enumerate(values):
        prod.produce(name, value=v, partition=i % partitions,
                     on_delivery=lambda err, msg: errors.append(err) if err else None)
    assert prod.flush(30) == 0 and errors == [], errors[:3]


def metadata_snapshot(node: Broker) -> int | None:
    """The index of the metadata log's Raft snapshot on a node (`raft-snapshot`), None if none."""
    try:
        head = (node.data_dir / "__cluster_metadata-0" / "raft-snapshot").read_bytes()[:13]
    except FileNotFoundError:
        return None
    assert head[:5] == b"RLSN\x02", head
    return int.from_bytes(head[5:13], "big")


def test_a_node_down_while_the_metadata_log_compacts_catches_up_by_its_snapshot(compacting_cluster):
    """The metadata log compacts to a snapshot of the topics every few KiB of entries (here 8 KiB):
    a node that was down meanwhile gets the leader's snapshot, lists every topic created while it
    was down, and removes the directories of a topic deleted meanwhile (a deletion it never applied
    as an entry); a whole-cluster restart then starts every node from its snapshot."""
    from confluent_kafka.admin import NewTopic

    nodes = compacting_cluster
    create_topic(nodes, "doomed", 1, replication_factor=3)
    wait_until(lambda: replicated_settled(nodes, "doomed"), 30, "doomed led")
    down = nodes[2]
    assert list(down.data_dir.glob("doomed-*")), "node 3 holds a replica of doomed"
    had = metadata_snapshot(down) or 0
    down.kill()
    admin = confluent_admin(nodes[0])
    admin.delete_topics(["doomed"], operation_timeout=20)["doomed"].result(timeout=30)
    names = [f"while-down-{i}" for i in range(60)]
    for chunk in (names[:30], names[30:]):
        fs = admin.create_topics([NewTopic(n, num_partitions=2, replication_factor=1) for n in chunk],
                                 request_timeout=30, operation_timeout=20)
        for n, f in fs.items():
            assert f.result(timeout=40) is None, n
    wait_until(lambda: all((metadata_snapshot(n) or 0) > had for n in nodes[:2]), 30,
               "the live nodes compacted their metadata logs")

    down.start()
    for n in names[::10]:
        wait_same_topic(nodes, n, 2)
    wait_same_topic(nodes, "doomed", None)
    assert any("leader's snapshot installed" in line for line in down.log_text().splitlines()), \
        down.log_tail()
    wait_until(lambda: not list(down.data_dir.glob("doomed-*")), 20,
               "doomed's directory removed on the node that missed its deletion")
    listed = set(confluent_topics(confluent_admin(down)))
    assert set(names) <= listed, sorted(set(names) - listed)

    # Every node restarts from its own snapshot (and the entries after it).
    for b in nodes:
        b.kill()
    for b in nodes:
        b.start()
    for b in nodes:
        assert (metadata_snapshot(b) or 0) > had

        def lists_them(b=b):
            listed = set(confluent_topics(confluent_admin(b)))
            return set(names) <= listed and "doomed" not in listed
        wait_until(lists_them, 30, f"{b.data_dir.name} lists the topics after the restart")
    create_topic(nodes, "after-restart", 1)
    for i, n in enumerate(nodes):
        assert "panicked" not in n.log_text(), f"node {i + 1} panicked: {n.log_tail()}"

    # `controller.quorum.voters` must stay as the cluster started (every Raft group restarts from
    # it, docs/replication.md "Removing a node"): a node restarted from its snapshot with the
    # list in another order refuses to start, and starts with the list it had.
    last = nodes[2]
    last.kill()
    right = list(last.sets)
    voters = next(s for s in right if s.startswith("controller.quorum.voters="))
    reordered = ",".join(reversed(voters.split("=", 1)[1].split(",")))
    last.sets = [s for s in right if s != voters] + [f"controller.quorum.voters={reordered}"]
    with pytest.raises(BrokerError, match="must keep that list"):
        last.start()
    last.sets = right
    last.start()
    wait_same_topic(nodes, "after-restart", 1)


def log_start(node: Broker, name: str, partition: int) -> int:
    """A partition's log start offset as `node` stored it (`log-start-offset`: magic, u64, CRC;
    storage/src/topic_log.rs), 0 when no record was ever deleted there."""
    try:
        b = (node.data_dir / f"{name}-{partition}" / "log-start-offset").read_bytes()
    except FileNotFoundError:
        return 0
    return int.from_bytes(b[4:12], "big")


def test_a_replicated_topic_grows_survives_a_whole_cluster_restart_and_is_deleted(cluster, tmp_path):
    """A factor-3 topic's DeleteRecords moves the log start on every replica; grown by
    CreatePartitions it gets its new partitions' Raft groups on every node; after all three nodes
    are SIGKILLed and started again its records are all there but the deleted ones and it takes
    more; deleted through another node, its directories (Raft logs included) go on every node, and
    no node logged a panic."""
    from confluent_kafka.admin import NewPartitions

    nodes = cluster
    name = "grown"
    create_topic(nodes, name, 2, replication_factor=3)
    wait_until(lambda: replicated_settled(nodes, name), 30, "two partitions led")
    first = [f"a{i}".encode() for i in range(100)]
    produce_acked(nodes, name, first, 2)
    admin3 = confluent_admin(nodes[2])  # held: a dropped client fails its futures

    # DeleteRecords travels through each partition's Raft log: the leader answers once a
    # majority holds it, and every replica moves its log start when it applies it. Partition 0
    # holds a0, a2, ... a98 at offsets 0-49: everything before 20 goes (then before 30, by
    # Kafka's tool); partition 1 is emptied to its high watermark (-1).
    deleted = admin3.delete_records([TopicPartition(name, 0, 20), TopicPartition(name, 1, -1)],
                                    request_timeout=15, operation_timeout=10)
    lows = {tp.partition: f.result(timeout=30).low_watermark for tp, f in deleted.items()}
    assert lows == {0: 20, 1: 50}, lows
    # Kafka's own kafka-delete-records, through another node, moves partition 0's further.
    spec = tmp_path / "delete-records.json"
    spec.write_text(json.dumps({"version": 1, "partitions": [{"topic": name, "partition": 0, "offset": 30}]}))
    out = kafka_tool("delete-records", "--bootstrap-server", nodes[1].bootstrap, "--offset-json-file", str(spec),
                     timeout=90)
    assert out.rc == 0 and "low_watermark: 30" in out.stdout, out
    lows[0] = 30
    wait_until(lambda: all(log_start(n, name, p) == low for n in nodes for p, low in lows.items()),
               20, "every replica's log start moved")
    kept = [v for i, v in enumerate(first) if i % 2 == 0 and i // 2 >= 30]

    admin3.create_partitions([NewPartitions(name, 4)])[name].result(timeout=30)
    wait_same_topic(nodes, name, 4)
    wait_until(lambda: replicated_settled(nodes, name), 30, "four partitions led")
    second = [f"b{i}".encode() for i in range(100)]
    produce_acked(nodes, name, second, 4)

    for b in nodes:
        b.kill()
    for b in nodes:
        b.start()
    wait_until(lambda: replicated_settled(nodes, name), 30, "led again after the whole cluster restarted")
    assert sorted(read_all(nodes[0], name, 4, 120)) == sorted(kept + second)
    assert all(log_start(n, name, p) == low for n in nodes for p, low in lows.items())
    produce_acked(nodes, name, [f"c{i}".encode() for i in range(40)], 4)

    admin2 = confluent_admin(nodes[1])
    admin2.delete_topics([name], operation_timeout=20)[name].result(timeout=30)
    wait_until(lambda: not any(list(n.data_dir.glob(f"{name}-*")) for n in nodes), 20,
               f"{name}'s directories removed on every node")
    for i, n in enumerate(nodes):
        assert "panicked" not in n.log_text(), f"node {i + 1} panicked: {n.log_tail()}"


def test_a_replicated_topic_keeps_every_acknowledged_record_through_leader_kills(compacting_cluster):
    """Replication factor 3 on three nodes: each partition is a Raft group over the nodes
    (engine/src/data/replica.rs). Metadata names one leader per partition, replicas and ISR all
    three; an idempotent acks=all producer keeps producing while the leader of partition 0 is
    SIGKILLed and restarted, round after round: every record is acknowledged (two of three
    replicas are a majority), each is read back exactly once at the offset it was given, and once
    every node is back and caught up the three nodes' segment files are byte for byte the same
    (a follower stores the batches the leader placed, as they are). The Raft logs compact every
    few KiB (the fixture's test knob; their segments are four intervals), so every node's Raft logs lose their first
    segments while the records stay in the topic logs."""
    from confluent_kafka import Producer

    from confluent_kafka import KafkaError

    nodes = compacting_cluster
    name, partitions, rounds, per_phase = "replicated", 3, 4, 150
    create_topic(nodes, name, partitions, replication_factor=3)
    # More than the nodes is Kafka's refusal (ReplicationControlManager: "Unable to replicate the
    # partition ..."); factor 2 has its own tests below.
    admin = confluent_admin(nodes[1])
    err = confluent_create(admin, "four-copies", partitions=1, replication_factor=4)
    assert err is not None and err.code() == KafkaError.INVALID_REPLICATION_FACTOR, err
    assert "only 3 broker(s) are registered" in err.str(), err.str()
    # A majority is what an acknowledgement waits for: asking for more copies is refused.
    err = confluent_create(admin, "three-insync", partitions=1, replication_factor=3,
                           config={"min.insync.replicas": "3"})
    assert err is not None and err.code() == KafkaError.INVALID_CONFIG, err
    assert confluent_create(admin, "two-insync", partitions=1, replication_factor=3,
                            config={"min.insync.replicas": "2"}) is None

    settled = replicated_settled
    wait_until(lambda: settled(nodes, name), 30,
               "every node names a leader and the full ISR for every partition")
    md = confluent_admin(nodes[0]).list_topics(topic=name, timeout=10)
    assert all(sorted(p.replicas) == [1, 2, 3] for p in md.topics[name].partitions.values())

    acked: dict[bytes, tuple[int, int]] = {}
    failed = []

    def on_delivery(err, msg):
        if err is None:
            acked[msg.value()] = (msg.partition(), msg.offset())
        else:
            failed.append(err)

    prod = Producer({"bootstrap.servers": ",".join(n.bootstrap for n in nodes), "acks": "all",
                     "enable.idempotence": True, "message.timeout.ms": 60000,
                     "topic.metadata.refresh.interval.ms": 1000, "retry.backoff.ms": 50,
                     "logger": logging.getLogger("librdkafka"), "broker.address.family": "v4"})
    sent = 0

    def produce(n):
        nonlocal sent
        for _ in range(n):
            # Padded so that the partitions' Raft logs fill several segments.
            prod.produce(name, value=f"v{sent}:".encode().ljust(300, b"."), partition=sent % partitions,
                         on_delivery=on_delivery)
            sent += 1
            prod.poll(0)
            time.sleep(0.002)

    took = []
    for r in range(rounds):
        produce(per_phase)
        # Asked until a leader is named: the Metadata request may reach the node restarted last
        # round, which answers LEADER_NOT_AVAILABLE until its replica hears from the leader.
        def named_leader():
            try:
                leader = partition_leaders(nodes[0], name)[0][0]
            except Exception:  # Metadata timed out: asked again
                return None
            return leader if leader in (1, 2, 3) else None

        leader = wait_until(named_leader, 30, f"round {r}: a leader named for partition 0")
        victim = nodes[leader - 1]
        victim.kill()
        killed = time.monotonic()
        produce(per_phase)
        before = len(acked)
        assert prod.flush(60) == 0, f"round {r}: records still unacknowledged"
        took.append(time.monotonic() - killed)
        assert len(acked) > before
        victim.start()
        wait_until(lambda: settled(nodes, name), 30,
                   f"round {r}: the cluster settles with node {leader} back")
    assert failed == [], failed[:5]
    assert len(acked) == sent, (len(acked), sent)
    log.info("replicated produce: %d records through %d leader kills, kill to flushed %s s",
             sent, rounds, [round(t, 1) for t in took])

    # Read back through each node's bootstrap: every acknowledged record once, at its offset.
    for i, n in enumerate(nodes):
        got = read_all(n, name, partitions, sent)
        assert sorted(got) == sorted(acked), f"read through node {i + 1}: {len(got)} of {sent}"
    per_partition: dict[int, list[int]] = {}
    for p, o in acked.values():
        per_partition.setdefault(p, []).append(o)
    for p, offsets in per_partition.items():
        assert sorted(offsets) == list(range(len(offsets))), f"partition {p}: offsets {sorted(offsets)[:10]}..."

    # Converged: the same bytes on every node. The restarted node may still be applying: wait
    # until the sizes agree, then stop every node (nothing mid-write) and compare the bytes.
    def sizes(p):
        return [sum(f.stat().st_size for f in (n.data_dir / f"{name}-{p}").glob("*.log"))
                for n in nodes]

    wait_until(lambda: all(len(set(sizes(p))) == 1 for p in range(partitions)), 30,
               "every node's copy of each partition has the same size")
    for b in nodes:
        b.stop()
    for i, n in enumerate(nodes):
        for p in range(partitions):
            raft = n.data_dir / f"{name}-{p}" / "raft"
            assert (raft / "raft-snapshot").exists(), f"node {i + 1} never compacted partition {p}"
            first = min(int(f.stem) for f in raft.glob("*.log"))
            assert first > 0, f"node {i + 1}, partition {p}: the Raft log kept its first segment"
    for p in range(partitions):
        logs = [sorted((n.data_dir / f"{name}-{p}").glob("*.log")) for n in nodes]
        contents = [b"".join(f.read_bytes() for f in fs) for fs in logs]
        assert contents[0] and contents[0] == contents[1] == contents[2], \
            f"partition {p}: the nodes' logs differ ({[len(c) for c in contents]} bytes)"


def uvarint(n: int) -> bytes:
    out = b""
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out += bytes([b | 0x80])
        else:
            return out + bytes([b])


def compact_string(s: str | None) -> bytes:
    if s is None:
        return b"\x00"
    b = s.encode()
    return uvarint(len(b) + 1) + b


def add_raft_voter(node: Broker, voter: int, directory: bytes, controller: str) -> tuple[int, str | None]:
    """AddRaftVoter v0 (flexible: request header v2) asked of `node`: voter `voter` with its
    directory id and CONTROLLER listener `host:port`. Returns (error code, error message)."""
    host, port = controller.rsplit(":", 1)
    body = (compact_string(CLUSTER_ID) + struct.pack(">ii", 30000, voter) + directory
            + uvarint(2) + compact_string("CONTROLLER") + compact_string(host)
            + struct.pack(">H", int(port)) + b"\x00" + b"\x00")
    payload = struct.pack(">hhi", 80, 0, 7) + kstring("ringleader-raw-test") + b"\x00" + body
    with connect(node.bootstrap, timeout=40) as s:
        s.sendall(struct.pack(">i", len(payload)) + payload)
        r = Reader(recv_frame(s))
    assert r.take(">i") == 7
    assert r.take("B") == 0  # response header v1: no tagged fields
    r.take(">i")  # throttle_time_ms
    code = r.take(">h")
    n = r.take("B")  # compact nullable string, short messages: one length byte
    message = None if n == 0 else r.take(f"{n - 1}s").decode()
    return code, message


def crc32c(data: bytes) -> int:
    crc = 0xFFFFFFFF
    for byte in data:
        crc ^= byte
        for _ in range(8):
            crc = (crc >> 1) ^ (0x82F63B78 if crc & 1 else 0)
    return crc ^ 0xFFFFFFFF


def directory_id(node: int) -> bytes:
    """Node `node`'s directory id as every Ringleader node derives it (`engine::cluster::derived_id`
    of "{cluster.id}/directory/{node}"): CRC-32C of "i/key" for each 32-bit word, version-4 shaped."""
    key = f"{CLUSTER_ID}/directory/{node}"
    b = bytearray(b"".join(struct.pack(">I", crc32c(f"{i}/{key}".encode())) for i in range(4)))
    b[6] = (b[6] & 0x0F) | 0x40
    b[8] = (b[8] & 0x3F) | 0x80
    return bytes(b)


def remove_raft_voter(node: Broker, voter: int) -> int:
    """RemoveRaftVoter v0 of `voter` asked of `node`: its error code."""
    body = compact_string(CLUSTER_ID) + struct.pack(">i", voter) + directory_id(voter) + b"\x00"
    payload = struct.pack(">hhi", 81, 0, 8) + kstring("ringleader-raw-test") + b"\x00" + body
    with connect(node.bootstrap, timeout=40) as s:
        s.sendall(struct.pack(">i", len(payload)) + payload)
        r = Reader(recv_frame(s))
    assert r.take(">i") == 8
    r.take("B")
    r.take(">i")
    return r.take(">h")


def offsets_replicas(node: Broker) -> dict[int, list[int]]:
    """partition -> replicas of __consumer_offsets as `node`'s Metadata tells it."""
    try:
        md = confluent_admin(node).list_topics(topic="__consumer_offsets", timeout=10)
    except Exception:
        return {0: []}
    return {p.id: list(p.replicas) for p in md.topics["__consumer_offsets"].partitions.values()}


def test_a_node_joins_a_compacted_cluster_and_takes_its_offsets_by_snapshot(compacting_cluster, tmp_path):
    """A fourth node joins three whose logs compacted (snapshots every 8 KiB): AddRaftVoter names it
    (its directory id from its log); every `__consumer_offsets` group and the metadata log take it as
    a learner, which installs the leaders' snapshots and becomes a voter; a replicated topic whose
    Raft logs compacted before it joined re-seeds it (a topic snapshot carries no records: node 4
    asks the leader for them, chunk by chunk, then takes the snapshot) and it joins the ISR; then
    one of the first nodes is removed, and once every group let it go two of the first three go:
    every acknowledged commit, and every acknowledged record of the re-seeded topic, is read
    through the new node."""
    import re

    nodes = compacting_cluster
    bootstrap = ",".join(n.bootstrap for n in nodes)
    create_topic(nodes, TOPIC, 1)
    create_topic(nodes, "wide", 1, replication_factor=3)
    wait_until(lambda: replicated_settled(nodes, "wide"), 30, "wide led")
    # Enough records that every replica of "wide" compacts its Raft log before node 4 joins.
    def wide_compacted():
        return all((n.data_dir / "wide-0" / "raft" / "raft-snapshot").exists() for n in nodes)
    wide = 0
    while not wide_compacted():
        produce_acked(nodes, "wide", [b"w%06d" % (wide + i) + b"x" * 200 for i in range(100)], 1)
        wide += 100
        assert sum(1 for _ in (nodes[0].data_dir / "wide-0").glob("*.log")) < 50, "never compacted"
    # Over 3 MiB more, so re-seeding takes several chunks (`SEED_CHUNK_BYTES`, 1 MiB).
    for _ in range(3):
        produce_acked(nodes, "wide", [b"w%06d" % (wide + i) + b"y" * 3000 for i in range(400)], 1)
        wide += 400
    p = offsets_partition(GROUP)
    c = consumer(bootstrap)
    acked = 0
    while min(raft_snapshot(n, p) or 0 for n in nodes) < 50:
        acked += 1
        commit_until_acked(c, acked)
        assert acked < 3000, "the offsets logs never compacted"

    voters = next(s for s in nodes[0].sets if s.startswith("controller.quorum.voters="))
    four = Broker(data_dir=tmp_path / "node4", log_path=tmp_path / "node4.log", listeners=["CONTROLLER"],
                  sets=["node.id=4", voters, f"cluster.id={CLUSTER_ID}",
                        f"offsets.topic.segment.bytes={SEGMENT_BYTES}"])
    four.start()
    nodes.append(four)  # the fixture kills it too
    found = re.search(r"directory_id=([0-9a-f-]{36})", four.log_text())
    assert found, four.log_tail()
    directory = bytes.fromhex(found.group(1).replace("-", ""))
    assert directory == directory_id(4), "the logged id is the derived one"
    assert add_raft_voter(nodes[0], 4, bytes(16), four.listener("CONTROLLER"))[0] == 42  # INVALID_REQUEST
    assert add_raft_voter(nodes[1], 4, directory, four.listener("CONTROLLER")) == (0, "NONE")
    assert add_raft_voter(nodes[2], 4, directory, four.listener("CONTROLLER"))[0] == 126  # DUPLICATE_VOTER

    # Node 4 installs the group's snapshot (its log never held the early entries) and votes.
    wait_until(lambda: (raft_snapshot(four, p) or 0) > 0, 30, "node 4 installed the offsets snapshot")

    def offsets_isr_has_four():
        try:
            return all(4 in isr for _, _, isr in partition_leaders(four, "__consumer_offsets", isr=True).values())
        except Exception:
            return False
    wait_until(offsets_isr_has_four, 60, "node 4 in the ISR of every __consumer_offsets partition")
    # The compacted topic's partition: node 4 holds none of the entries the leader's Raft log still
    # has, so it is re-seeded from the leader's topic log and then takes the leader's snapshot.
    def wide_isr_has_four():
        try:
            return all(4 in partition_leaders(n, "wide", isr=True)[0][2] for n in nodes)
        except Exception:
            return False
    wait_until(wide_isr_has_four, 60, "node 4 re-seeded and in wide's ISR")
    assert (four.data_dir / "wide-0" / "raft" / "raft-snapshot").exists(), "node 4 took a snapshot"
    seeded = sum(f.stat().st_size for f in (four.data_dir / "wide-0").glob("*.log"))
    assert seeded > 3 << 20, seeded
    assert "re-seeding: every record the snapshot stands for is held" in four.log_text(), four.log_tail()
    produce_acked(nodes, "wide", [b"w%06d" % (wide + i) for i in range(50)], 1)
    wide += 50

    for _ in range(5):
        acked += 1
        commit_until_acked(c, acked)
    # Two of the first three go, one removed first: the node left and node 4 are every group's
    # majority. (The node holding TOPIC's one replica stays: a factor-1 partition's node cannot be
    # removed.)
    holder = partition_leaders(nodes[0], TOPIC)[0][0]
    gone, also = [i for i in (1, 2, 3) if i != holder]
    assert remove_raft_voter(nodes[holder - 1], gone) == 0
    left = sorted({1, 2, 3, 4} - {gone})
    wait_until(lambda: all(sorted(r) == left for r in offsets_replicas(four).values()), 60,
               f"every __consumer_offsets group let node {gone} go")

    def wide_let_go():
        try:
            return sorted(partition_leaders(four, "wide", isr=True)[0][2]) == left
        except Exception:
            return False
    wait_until(wide_let_go, 60, f"wide let node {gone} go")
    acked += 1
    commit_until_acked(c, acked)
    nodes[gone - 1].kill()
    nodes[also - 1].kill()
    c.close()
    assert committed(four.bootstrap) == acked
    got = read_all(four, "wide", 1, wide, timeout=60)
    assert got and [v[:7] for v in got] == [b"w%06d" % i for i in range(wide)], (len(got), wide)
    for n in (nodes[holder - 1], four):
        assert "panicked" not in n.log_text(), n.log_tail()


def quorum_times(node: Broker, version: int = 1) -> tuple[int, dict[int, tuple[int, int]]]:
    """DescribeQuorum v0 or v1 (flexible) asked of `node` itself: the metadata log's leader and each
    voter's (last fetch, last caught-up) timestamps as `node` reports them (v0 has none: -1, -1)."""
    topics = (uvarint(2) + compact_string("__cluster_metadata")
              + uvarint(2) + struct.pack(">i", 0) + b"\x00" + b"\x00")
    payload = struct.pack(">hhi", 55, version, 9) + kstring("ringleader-raw-test") + b"\x00" + topics + b"\x00"
    with connect(node.bootstrap, timeout=10) as s:
        s.sendall(struct.pack(">i", len(payload)) + payload)
        r = Reader(recv_frame(s))
    assert r.take(">i") == 9
    assert r.take("B") == 0  # response header v1: no tagged fields
    assert r.take(">h") == 0  # error_code
    assert r.take("B") == 2  # one topic
    n = r.take("B")
    assert r.take(f"{n - 1}s") == b"__cluster_metadata"
    assert r.take("B") == 2  # one partition
    _partition, err, leader, _epoch, _hw = r.take(">ihiiq")
    assert err == 0
    times = {}
    for _ in range(r.take("B") - 1):  # current voters
        replica, _leo = r.take(">iq")
        fetched, caught_up = r.take(">qq") if version >= 1 else (-1, -1)
        assert r.take("B") == 0  # tagged fields
        times[replica] = (fetched, caught_up)
    return leader, times


def leaders_of(node: Broker, name: str) -> dict[int, int]:
    """partition -> leader of `name` as `node`'s Metadata tells it ({} while it cannot answer)."""
    try:
        return {p: l for p, (l, _) in partition_leaders(node, name).items()}
    except Exception:
        return {}


@contextlib.contextmanager
def spread_cluster(tmp_path, extra_sets, partitions: int):
    """Three nodes with `TOPIC` (factor 1) and "spread" (factor 3, `partitions` of them) led by
    their preferred replicas, which Metadata lists first and which cover every node. Yields the
    nodes (a list a test may append a node to) and spread's preferred leaders; afterwards no
    node logged a panic, and every node is killed."""
    nodes = start_cluster(tmp_path, extra_sets)
    try:
        create_topic(nodes, TOPIC, 1)
        create_topic(nodes, "spread", partitions, replication_factor=3)
        wait_until(lambda: replicated_settled(nodes, "spread"), 30, "spread led")
        preferred = preferred_replicas(nodes[0], "spread")
        assert sorted(set(preferred.values())) == [1, 2, 3], preferred
        wait_until(lambda: leaders_of(nodes[0], "spread") == preferred, 30,
                   "spread led by its preferred replicas")
        yield nodes, preferred
        for n in nodes:
            assert "panicked" not in n.log_text(), n.log_tail()
    finally:
        for n in nodes:
            n.kill()


def preferred_replicas(node: Broker, name: str) -> dict[int, int]:
    """partition -> its first replica (Kafka's preferred replica) as `node`'s Metadata tells it."""
    md = confluent_admin(node).list_topics(topic=name, timeout=10)
    return {p.id: p.replicas[0] for p in md.topics[name].partitions.values()}


def test_leadership_goes_back_to_the_preferred_replicas_and_to_a_joined_node(tmp_path):
    """Kafka's automatic preferred leader election (`auto.leader.rebalance.enable`, every
    `leader.imbalance.check.interval.seconds`, 1 s here): a node killed loses its partitions'
    leadership to the others; restarted and caught up, it leads its preferred partitions again
    (each `__consumer_offsets` partition p prefers node p mod 3 + 1, a topic's partitions the
    nodes the metadata log placed them on). A fourth node added with AddRaftVoter becomes the
    preferred leader of its share (12 of the 50 offsets partitions, 2 of the topic's 8) and
    takes their leadership; every acknowledged commit survives the moves."""
    import re

    with spread_cluster(tmp_path, ["leader.imbalance.check.interval.seconds=1"], 8) as (nodes, preferred):
        bootstrap = ",".join(n.bootstrap for n in nodes)
        offsets_preferred = {p: p % 3 + 1 for p in range(50)}

        def offsets_led_as_preferred(node, want):
            got = leaders_of(node, "__consumer_offsets")
            return len(got) == 50 and all(got[p] == want[p] for p in range(50))
        wait_until(lambda: offsets_led_as_preferred(nodes[0], offsets_preferred), 60,
                   "every offsets partition led by its preferred node")
        # DescribeQuorum asked of the metadata log's leader: every voter fetched and was caught up
        # within the last seconds (Kafka's leader reports both).
        leader, _ = quorum_times(nodes[0])
        assert quorum_times(nodes[1], version=0)[0] == leader, "v0 answers too (no v2 field set)"
        _, times = quorum_times(nodes[leader - 1])
        now_ms = time.time() * 1000
        assert sorted(times) == [1, 2, 3], times
        for replica, (fetched, caught_up) in times.items():
            assert now_ms - 5000 < fetched <= now_ms + 1000, (replica, times)
            assert now_ms - 5000 < caught_up <= now_ms + 1000, (replica, times)
        # A follower answers with the leader's view as the leader last sent it (a Kafka broker
        # forwards DescribeQuorum to the leader): the same voters, every timestamp recent.
        their_leader, theirs = quorum_times(nodes[leader % 3])  # node leader % 3 + 1, a follower
        assert their_leader == leader and sorted(theirs) == [1, 2, 3], theirs
        for replica, (fetched, caught_up) in theirs.items():
            assert now_ms - 5000 < fetched <= now_ms + 2000, (replica, theirs)
            assert now_ms - 5000 < caught_up <= now_ms + 2000, (replica, theirs)
        c = consumer(bootstrap)
        acked = 1
        commit_until_acked(c, acked)

        nodes[1].kill()
        wait_until(lambda: 2 not in leaders_of(nodes[0], "spread").values()
                   and 2 not in leaders_of(nodes[0], "__consumer_offsets").values(), 30,
                   "node 2's partitions led elsewhere")
        acked += 1
        commit_until_acked(c, acked)
        nodes[1].start()
        wait_until(lambda: leaders_of(nodes[0], "spread") == preferred
                   and offsets_led_as_preferred(nodes[0], offsets_preferred), 60,
                   "node 2 leads its preferred partitions again")
        assert "handed to the preferred replicas" in nodes[0].log_text() + nodes[2].log_text()
        acked += 1
        commit_until_acked(c, acked)

        voters = next(s for s in nodes[0].sets if s.startswith("controller.quorum.voters="))
        four = Broker(data_dir=tmp_path / "node4", log_path=tmp_path / "node4.log", listeners=["CONTROLLER"],
                      sets=["node.id=4", voters, f"cluster.id={CLUSTER_ID}",
                            "leader.imbalance.check.interval.seconds=1"])
        four.start()
        nodes.append(four)
        found = re.search(r"directory_id=([0-9a-f-]{36})", four.log_text())
        assert found, four.log_tail()
        directory = bytes.fromhex(found.group(1).replace("-", ""))
        assert add_raft_voter(nodes[0], 4, directory, four.listener("CONTROLLER")) == (0, "NONE")

        def four_leads_its_share():
            off = leaders_of(four, "__consumer_offsets")
            spread = leaders_of(four, "spread")
            return (sum(1 for l in off.values() if l == 4) == 12
                    and sum(1 for l in spread.values() if l == 4) == 2)
        wait_until(four_leads_its_share, 90, "node 4 leads its share")
        off = leaders_of(four, "__consumer_offsets")
        # Only node 4's share moved: every other partition is led by the node it preferred.
        assert all(l in (4, offsets_preferred[p]) for p, l in off.items()), off
        spread = leaders_of(four, "spread")
        assert all(l in (4, preferred[p]) for p, l in spread.items()), spread
        acked += 1
        commit_until_acked(c, acked)
        c.close()
        assert committed(four.bootstrap) == acked


def leader_election(node: Broker, *args: str):
    """Kafka 4.4.0's kafka-leader-election against `node`, bounded."""
    return kafka_tool("leader-election", "--bootstrap-server", node.bootstrap, *args, timeout=90)


def test_kafka_leader_election_moves_leadership_to_the_preferred_replicas(tmp_path):
    """ElectLeaders through Kafka's own kafka-leader-election, with the automatic rebalancing off
    so only the tool moves leaders. A partition already led by its preferred replica needs no
    election; a node killed and restarted stays a follower of its partitions until an election is
    asked for; the tool's answer comes once the preferred replica leads (only the named partition
    moves); `--all-topic-partitions` moves the rest, `__consumer_offsets` included; a preferred
    replica that is down is PREFERRED_LEADER_NOT_AVAILABLE; an unclean election where a leader
    exists is not needed. The outputs are those the reference broker gives for the same steps
    (Kafka 4.4.0, three KRaft nodes, `auto.leader.rebalance.enable=false`). Every acknowledged
    commit and record survives the moves."""
    with spread_cluster(tmp_path, ["auto.leader.rebalance.enable=false"], 6) as (nodes, preferred):
        bootstrap = ",".join(n.bootstrap for n in nodes)
        on_two = sorted(p for p, n in preferred.items() if n == 2)
        assert len(on_two) == 2, preferred

        r = leader_election(nodes[0], "--election-type", "preferred", "--topic", "spread", "--partition", "0")
        assert r.rc == 0 and r.stdout.strip() == "Valid replica already elected for partitions spread-0", r
        c = consumer(bootstrap)
        acked = 1
        commit_until_acked(c, acked)

        nodes[1].kill()
        wait_until(lambda: 2 not in leaders_of(nodes[0], "spread").values(), 30, "node 2's partitions led elsewhere")
        # Records and a commit while node 2 is down: its logs are behind, so it cannot win its
        # partitions back by campaigning when it restarts.
        produce_acked(nodes, "spread", [b"while-down-%d" % i for i in range(60)], 6)
        acked += 1
        commit_until_acked(c, acked)
        r = leader_election(nodes[0], "--election-type", "preferred", "--topic", "spread",
                            "--partition", str(on_two[0]))
        assert r.rc == 1 and "PreferredLeaderNotAvailableException" in r.stdout, r
        assert f"spread-{on_two[0]}" in r.stdout, r

        nodes[1].start()
        wait_until(lambda: replicated_settled(nodes, "spread"), 60, "node 2 back in every ISR")
        time.sleep(2)  # a few rebalance intervals' worth of Raft ticks: nothing moves by itself
        assert 2 not in leaders_of(nodes[0], "spread").values(), leaders_of(nodes[0], "spread")

        first, second = on_two
        r = leader_election(nodes[2], "--election-type", "preferred", "--topic", "spread",
                            "--partition", str(first))
        assert r.rc == 0, r
        assert r.stdout.strip() == f"Successfully completed leader election (PREFERRED) for partitions spread-{first}", r
        wait_until(lambda: leaders_of(nodes[0], "spread").get(first) == 2, 5, "every node sees node 2 lead")
        assert leaders_of(nodes[0], "spread").get(second) != 2, "only the named partition moved"

        r = leader_election(nodes[0], "--election-type", "preferred", "--all-topic-partitions")
        assert r.rc == 0, r
        assert r.stdout.startswith("Successfully completed leader election (PREFERRED) for partitions "), r
        assert f"spread-{second}" in r.stdout and f"spread-{first}" not in r.stdout, r
        wait_until(lambda: leaders_of(nodes[0], "spread") == preferred, 10, "spread led as preferred")
        offsets = leaders_of(nodes[0], "__consumer_offsets")
        assert offsets == {p: p % 3 + 1 for p in range(50)}, offsets
        # Metadata lists the preferred replica first, as Kafka does, the offsets topic's too.
        assert preferred_replicas(nodes[0], "__consumer_offsets") == offsets

        # librdkafka's Admin too (its own ElectLeaders request), after node 3 came back:
        # the answer comes once its partitions are led by it again; the time is the figure in
        # docs/performance.md ("Preferred leader election").
        from confluent_kafka import ElectionType
        nodes[2].kill()
        wait_until(lambda: 3 not in leaders_of(nodes[0], "spread").values(), 30, "node 3's partitions led elsewhere")
        produce_acked(nodes, "spread", [b"while-3-down-%d" % i for i in range(60)], 6)
        nodes[2].start()
        wait_until(lambda: replicated_settled(nodes, "spread"), 60, "node 3 back in every ISR")
        on_three = [TopicPartition("spread", p) for p, n in preferred.items() if n == 3]
        admin = confluent_admin(nodes[0])
        start = time.monotonic()
        # No timeouts passed: confluent-kafka 2.16.1's wrapper fails on either keyword (a
        # SystemError from its argument parsing); the defaults are socket.timeout.ms (60 s).
        result = admin.elect_leaders(ElectionType.PREFERRED, on_three).result()
        took_ms = (time.monotonic() - start) * 1000
        assert {(tp.topic, tp.partition): err for tp, err in result.items()} == {
            ("spread", tp.partition): None for tp in on_three}, result
        assert all(leaders_of(nodes[1], "spread")[tp.partition] == 3 for tp in on_three)
        log.info("librdkafka elect_leaders of %d partitions answered in %.0f ms", len(on_three), took_ms)
        print(f"ELECT_LEADERS_MS {took_ms:.0f} for {len(on_three)} partitions")

        r = leader_election(nodes[0], "--election-type", "unclean", "--topic", "spread", "--partition", "1")
        assert r.rc == 0 and r.stdout.strip() == "Valid replica already elected for partitions spread-1", r
        r = leader_election(nodes[0], "--election-type", "preferred", "--topic", "ghost", "--partition", "0")
        assert r.rc == 1 and "UnknownTopicOrPartitionException: No such topic as ghost" in r.stdout, r

        acked += 1
        commit_until_acked(c, acked)
        c.close()
        assert committed(bootstrap) == acked
        want = [b"while-down-%d" % i for i in range(60)] + [b"while-3-down-%d" % i for i in range(60)]
        got = read_all(nodes[0], "spread", 6, len(want))
        assert sorted(got) == sorted(want)


def own_metadata(node: Broker, name: str) -> dict[int, tuple[int, int, list[int], list[int]]]:
    """partition -> (error code, leader, replicas, ISR) of `name` as `node` itself answers Metadata v4
    (no auto-creation), {} while it does not know the topic. Sent to the node directly: an admin
    client sends its Metadata request to a broker of its choosing (see `replicated_settled`), so it
    cannot tell what a given node, say one holding no replica, answers."""
    body = struct.pack(">i", 1) + kstring(name) + b"\x00"  # one topic; allow_auto_topic_creation false
    with connect(node.bootstrap, timeout=10) as s:
        s.sendall(request_frame(3, 4, 11, body))
        r = Reader(recv_frame(s))
    assert r.take(">i") == 11
    r.take(">i")  # throttle_time_ms
    for _ in range(r.take(">i")):  # brokers: node id, host, port, rack
        r.take(">i"), r.string(), r.take(">i"), r.string()
    r.string()  # cluster_id
    r.take(">i")  # controller_id
    assert r.take(">i") == 1, "one topic asked, one answered"
    err = r.take(">h")
    assert r.string() == name
    r.take("B")  # is_internal
    out = {}
    for _ in range(r.take(">i")):
        p_err, p, leader = r.take(">hii")
        replicas = [r.take(">i") for _ in range(r.take(">i"))]
        isr = [r.take(">i") for _ in range(r.take(">i"))]
        out[p] = (p_err, leader, replicas, isr)
    assert r.remaining() == 0, f"{r.remaining()} bytes after the Metadata v4 response"
    return {} if err != 0 else out


def wait_pairs(nodes, name: str, partitions: int, what: str, ask=None, without: int | None = None,
               timeout: float = 60.0) -> dict[int, tuple[int, list[int]]]:
    """Wait until each node of `ask` (node ids; default every live node), asked directly, answers
    for every partition of `name`: no error, two replicas (none of them `without`), a leader among
    them and both in the ISR, every node the same. Returns partition -> (leader, replicas)."""
    ask = ask or [i + 1 for i, n in enumerate(nodes) if n.alive()]
    deadline = time.monotonic() + timeout
    while True:
        views = {}
        for i in ask:
            try:
                views[i] = {p: (e, l, rs, sorted(isr))
                            for p, (e, l, rs, isr) in own_metadata(nodes[i - 1], name).items()}
            except OSError as e:  # a node still starting
                views[i] = repr(e)
        first = views[ask[0]]
        if (all(v == first for v in views.values()) and isinstance(first, dict)
                and sorted(first) == list(range(partitions))
                and all(e == 0 and len(set(rs)) == 2 == len(rs) and without not in rs and l in rs
                        and isr == sorted(rs) for e, l, rs, isr in first.values())):
            return {p: (l, rs) for p, (_, l, rs, _) in first.items()}
        assert time.monotonic() < deadline, f"{what}: not within {timeout:.0f} s; nodes answer {views}"
        time.sleep(0.2)


def end_offsets(nodes, name: str, partitions: int, via: Broker) -> dict[int, int]:
    """partition -> log end offset (ListOffsets latest) as the partition's leader answers it, the
    leader as `via` names it (asked again while leadership moves: NOT_LEADER_OR_FOLLOWER or
    LEADER_NOT_AVAILABLE)."""
    out: dict[int, int] = {}

    def answered():
        view = own_metadata(via, name)
        for p in range(partitions):
            leader = view.get(p, (0, -1))[1]
            if p in out or leader not in (1, 2, 3) or not nodes[leader - 1].alive():
                continue
            err, offset = list_offsets_v1(nodes[leader - 1], name, p)
            assert err in (0, 5, 6), f"partition {p} asked of its leader {leader}: error {err}"
            if err == 0:
                out[p] = offset
        return len(out) == partitions
    wait_until(answered, 30, f"every partition's leader of {name} answers ListOffsets")
    return out


def topic_log(node: Broker, name: str, partition: int) -> list:
    """A node's topic log segments of a partition (`<topic>-<p>/*.log`, not its Raft log under `raft/`)."""
    return sorted((node.data_dir / f"{name}-{partition}").glob("*.log"))


def topic_log_bytes(node: Broker, name: str, partition: int) -> int:
    return sum(f.stat().st_size for f in topic_log(node, name, partition))


def pairs_hold_alike(nodes, name: str, sets: dict[int, list[int]]) -> bool:
    """Both replicas of every partition (partition -> its two node ids) have a topic log, of the
    same number of bytes."""
    return all(0 < topic_log_bytes(nodes[a - 1], name, p) == topic_log_bytes(nodes[b - 1], name, p)
               for p, (a, b) in sets.items())


def pairs_topic(nodes, name: str, partitions: int, values: list[bytes]) -> dict[int, list[int]]:
    """Create `name` with replication factor 2, wait until every node names 2 replicas, a leader and
    an ISR of 2 for each partition, produce `values` (acks=all, round robin); partition -> replicas."""
    create_topic(nodes, name, partitions, replication_factor=2)
    placed = wait_pairs(nodes, name, partitions, "every node names 2 replicas, a leader and an ISR of 2")
    produce_acked(nodes, name, values, partitions)
    return {p: rs for p, (_, rs) in placed.items()}


def test_a_topic_of_replication_factor_2_lives_on_two_of_three_nodes(cluster):
    """Replication factor 2 on three nodes: each partition is a Raft group of two of them, striped
    as Kafka's `StripedReplicaPlacer` does (the placed node, its preferred leader, then the voter
    after it). Every node's own Metadata names the same two replicas, a leader among them and both
    in sync, the node holding none too (the leaders' news reaches it); only the two replicas have
    the partition on disk. Partition 0's leader SIGKILLed: both nodes left, its other replica and
    the node outside its set, name that other replica its leader, and every acknowledged record
    reads back; restarted, the node is back in sync everywhere."""
    nodes = cluster
    name, partitions = "pairs", 6
    # acks=all: answered once both replicas (a majority of two) hold each record.
    values = [b"pair-%d" % i for i in range(300)]
    replicas = pairs_topic(nodes, name, partitions, values)
    # The metadata log picks partition 0's node; each next partition goes to the next voter, its
    # second replica to the voter after that (`controller.quorum.voters` order 1, 2, 3, wrapping).
    first = replicas[0][0]
    striped = {p: [(first - 1 + p) % 3 + 1, (first + p) % 3 + 1] for p in range(partitions)}
    assert replicas == striped, f"replicas {replicas}, striped from node {first}: {striped}"
    held = {i: sorted(p for p, rs in replicas.items() if i in rs) for i in (1, 2, 3)}
    assert all(len(ps) == 4 for ps in held.values()), f"replicas per node: {held}"

    assert end_offsets(nodes, name, partitions, nodes[0]) == {p: 50 for p in range(partitions)}

    # On disk only where Metadata says: the third node never opens the partition. Both replicas'
    # topic logs fill (a follower writes a batch once the entry holding it commits, so a moment
    # after the leader answered).
    def on_disk(p):
        return sorted(i + 1 for i, n in enumerate(nodes) if (n.data_dir / f"{name}-{p}").exists())
    for p, rs in replicas.items():
        assert on_disk(p) == sorted(rs), f"{name}-{p} on nodes {on_disk(p)}, replicas {rs}"
    wait_until(lambda: pairs_hold_alike(nodes, name, replicas), 30,
               "both replicas of every partition hold its records")

    # Partition 0's leader dies. A Raft group of two needs both to elect a leader (a majority of
    # two is two; Kafka's ISR would shrink to the survivor instead, docs/compatibility.md), so
    # partition 0 has none until the node is back, and both nodes left say so, the one outside
    # its set included: it stops naming the dead node (its word is not repeated, and the node is
    # seen down). The dead node stays a replica (Kafka lists an offline replica until a
    # reassignment).
    leader = wait_pairs(nodes, name, partitions, "settled before the kill")[0][0]
    survivor = next(i for i in replicas[0] if i != leader)
    outsider = next(i for i in (1, 2, 3) if i not in replicas[0])
    nodes[leader - 1].kill()
    deadline = time.monotonic() + 30
    while True:
        views = {}
        for i in (survivor, outsider):
            try:
                views[i] = own_metadata(nodes[i - 1], name).get(0)
            except OSError as e:
                views[i] = repr(e)
        if all(isinstance(v, tuple) and v[:3] == (5, -1, replicas[0]) for v in views.values()):
            break
        assert time.monotonic() < deadline, (
            f"node {leader} killed: nodes {survivor} (replica) and {outsider} (not) should report "
            f"partition 0 without a leader (LEADER_NOT_AVAILABLE) within 30 s; they answer {views}")
        time.sleep(0.2)
    # The partitions the dead node has no replica of go on: read through the node outside
    # partition 0's set, which sends the client to their leaders.
    untouched = [p for p, rs in replicas.items() if leader not in rs]
    assert len(untouched) == 2, f"node {leader} is in the sets of all but {untouched}"
    want = sorted(v for i, v in enumerate(values) if i % partitions in untouched)
    got = read_all(nodes[outsider - 1], name, partitions, len(want), timeout=60, only=untouched)
    assert sorted(got) == want, f"read partitions {untouched} with node {leader} down: {len(got)} of {len(want)}"

    nodes[leader - 1].start()
    back = wait_pairs(nodes, name, partitions, f"node {leader} back in sync")
    assert {p: rs for p, (_, rs) in back.items()} == replicas, "the replicas never moved"
    for p, rs in replicas.items():
        assert on_disk(p) == sorted(rs), f"{name}-{p} on nodes {on_disk(p)} after the restart, replicas {rs}"
    got = read_all(nodes[outsider - 1], name, partitions, len(values), timeout=60)
    assert sorted(got) == sorted(values), f"read after the restart: {len(got)} of {len(values)}"
    for i, n in enumerate(nodes):
        assert "panicked" not in n.log_text(), f"node {i + 1} panicked: {n.log_tail()}"


def test_removing_a_node_moves_its_replicas_of_a_factor_2_topic_to_another(cluster):
    """RemoveRaftVoter of a node holding replicas of a factor-2 topic: in each of its four replica
    sets the voter after it that is not in the set (here the only other node) takes its place
    (`MetadataState::remove_voter`), the partition's leader adds it and lets the removed one go,
    and it catches up. Then the two nodes left name, for every partition, two replicas, neither the
    removed node, both in sync; the new replicas hold the partition on disk with the leader's
    records byte for byte; every acknowledged record reads back; and with the removed node killed
    every partition still takes acks=all writes (a group of two that still counted it could not)."""
    nodes = cluster
    name, partitions = "pairs", 6
    first = [b"before-%d" % i for i in range(300)]
    before = pairs_topic(nodes, name, partitions, first)

    # Partition 0's leader goes (it hands its partitions' leadership over first), asked of
    # another node; the metadata log's leader may be either.
    gone = wait_pairs(nodes, name, partitions, "settled before the removal")[0][0]
    left = [i for i in (1, 2, 3) if i != gone]
    assert remove_raft_voter(nodes[left[0] - 1], gone) == 0
    after = wait_pairs(nodes, name, partitions, f"node {gone}'s replicas moved", ask=left, without=gone)
    moved = sorted(p for p, rs in before.items() if gone in rs)
    assert len(moved) == 4, f"node {gone} held {moved}"
    # The new replica takes the removed one's slot, so a preferred leader is replaced by one; the
    # sets without the removed node are as they were.
    want = {p: [next(i for i in left if i not in rs) if r == gone else r for r in rs]
            for p, rs in before.items()}
    assert {p: rs for p, (_, rs) in after.items()} == want, f"before {before}, after {after}"

    # The new replicas caught up: every replica of every partition has it on disk and as many bytes
    # of topic log as the other (a replica re-seeded or fed the entries stores the leader's batches
    # as they are); the leaders' log ends are what was acknowledged.
    wait_until(lambda: pairs_hold_alike(nodes, name, want), 30,
               f"the new replicas of partitions {moved} hold their records")
    assert end_offsets(nodes, name, partitions, nodes[left[0] - 1]) == {p: 50 for p in range(partitions)}
    got = read_all(nodes[left[1] - 1], name, partitions, len(first), timeout=60)
    assert sorted(got) == sorted(first), f"read after the removal: {len(got)} of {len(first)}"

    # Every group is the two nodes left now: with the removed node dead, each partition still
    # commits (its two replicas both up, a majority of two).
    nodes[gone - 1].kill()
    second = [b"after-%d" % i for i in range(60)]
    produce_acked(nodes, name, second, partitions)
    assert end_offsets(nodes, name, partitions, nodes[left[0] - 1]) == {p: 60 for p in range(partitions)}
    got = read_all(nodes[left[0] - 1], name, partitions, len(first) + len(second), timeout=60)
    assert sorted(got) == sorted(first + second), f"read without node {gone}: {len(got)}"

    # The same bytes on both replicas: wait until the sizes agree, stop both (nothing mid-write),
    # compare.
    wait_until(lambda: pairs_hold_alike(nodes, name, want), 30,
               "both replicas of every partition hold the records written without the removed node")
    for i in left:
        nodes[i - 1].stop()
    for p in range(partitions):
        contents = [b"".join(f.read_bytes() for f in topic_log(nodes[i - 1], name, p)) for i in left]
        assert contents[0] and contents[0] == contents[1], \
            f"partition {p}: nodes {left} differ ({[len(c) for c in contents]} bytes)"
    for i, n in enumerate(nodes):
        assert "panicked" not in n.log_text(), f"node {i + 1} panicked: {n.log_tail()}"


def reassign_tool(node: Broker, tmp_path, action: str, moves: dict[int, list[int]], name: str, *extra: str):
    """Kafka 4.4.0's kafka-reassign-partitions against `node`: `action` (--execute, --verify,
    --cancel) with a reassignment JSON file of `moves` (partition -> replicas) of topic `name`."""
    plan = tmp_path / f"reassign-{action.strip('-')}-{time.monotonic_ns()}.json"
    plan.write_text(json.dumps({"version": 1, "partitions": [
        {"topic": name, "partition": p, "replicas": rs, "log_dirs": ["any"] * len(rs)}
        for p, rs in moves.items()]}))
    return kafka_tool("reassign-partitions", "--bootstrap-server", node.bootstrap, action,
                      "--reassignment-json-file", str(plan), *extra, timeout=90)


def test_kafka_reassign_partitions_moves_a_partition_to_another_node_and_cancels(cluster, tmp_path):
    """kafka-reassign-partitions (Kafka 4.4.0's own tool) moves partition 0 of a factor-2 topic
    from one of its nodes to the node outside its set: AlterPartitionReassignments records the
    target, the partition's Raft leader adds the new node (a learner until caught up), then lets
    the old one go, and ListPartitionReassignments stops listing it once the group settled, so
    `--verify` reports it complete. Afterwards every node's Metadata names the new pair, the new
    replica holds the leader's bytes, and with the node moved off killed the partition still takes
    acks=all writes. Then a move to that dead node stays under way (it cannot catch up):
    `--list` shows it with its adding and removing replicas, `--cancel` puts the set back, and the
    partition goes on committing."""
    nodes = cluster
    name, partitions = "moving", 3
    first = [b"first-%d" % i for i in range(150)]
    sets = pairs_topic(nodes, name, partitions, first)

    off, stays = sets[0]
    to = next(i for i in (1, 2, 3) if i not in sets[0])
    r = reassign_tool(nodes[stays - 1], tmp_path, "--execute", {0: [to, stays]}, name)
    assert r.rc == 0 and "Successfully started partition reassignment" in r.stdout, r
    deadline = time.monotonic() + 60
    while True:
        r = reassign_tool(nodes[to - 1], tmp_path, "--verify", {0: [to, stays]}, name, "--preserve-throttles")
        if r.rc == 0 and f"Reassignment of partition {name}-0 is completed" in r.stdout:
            break
        assert time.monotonic() < deadline, f"partition 0 not moved to node {to} within 60 s:\n{r}"
        time.sleep(0.5)
    moved = {**sets, 0: [to, stays]}
    after = wait_pairs(nodes, name, partitions, f"partition 0 on nodes {to} and {stays}")
    assert {p: rs for p, (_, rs) in after.items()} == moved
    wait_until(lambda: pairs_hold_alike(nodes, name, moved), 30,
               f"node {to} holds partition 0's records as node {stays} does")

    # The group is {to, stays} now: with the node moved off dead, partition 0 still commits.
    nodes[off - 1].kill()
    second = [b"second-%d" % i for i in range(40)]
    produce_acked(nodes, name, second, 1)  # all to partition 0
    want = sorted([v for i, v in enumerate(first) if i % partitions == 0] + second)
    got = read_all(nodes[to - 1], name, partitions, len(want), timeout=60, only=[0])
    assert sorted(got) == want, f"partition 0 after the move: {len(got)} of {len(want)}"

    # A move back to the dead node cannot finish: listed as under way, then cancelled.
    r = reassign_tool(nodes[stays - 1], tmp_path, "--execute", {0: [off, stays]}, name)
    assert r.rc == 0, r
    r = kafka_tool("reassign-partitions", "--bootstrap-server", nodes[to - 1].bootstrap, "--list", timeout=90)
    assert r.rc == 0, r
    line = next((ln for ln in r.stdout.splitlines() if ln.startswith(f"{name}-0:")), None)
    assert line is not None, r
    assert f"adding: {off}" in line and f"removing: {to}" in line, r
    r = reassign_tool(nodes[to - 1], tmp_path, "--cancel", {0: [off, stays]}, name, "--preserve-throttles")
    assert r.rc == 0 and f"Successfully cancelled partition reassignment for: {name}-0" in r.stdout, r
    r = kafka_tool("reassign-partitions", "--bootstrap-server", nodes[to - 1].bootstrap, "--list", timeout=90)
    assert r.rc == 0 and f"{name}-0:" not in r.stdout, r
    # Partition 0's group lets the dead node go again (the leader stops waiting for it); the
    # partitions it is a replica of have no leader while it is down, so only partition 0 is asked.
    deadline = time.monotonic() + 60
    while True:
        views = {i: own_metadata(nodes[i - 1], name).get(0) for i in (to, stays)}
        if all(v is not None and v[0] == 0 and v[2] == [to, stays] and sorted(v[3]) == sorted([to, stays])
               and v[1] in (to, stays) for v in views.values()):
            break
        assert time.monotonic() < deadline, f"partition 0 not back on nodes {to}, {stays}: {views}"
        time.sleep(0.2)
    third = [b"third-%d" % i for i in range(20)]
    produce_acked(nodes, name, third, 1)
    got = read_all(nodes[stays - 1], name, partitions, len(want) + len(third), timeout=60, only=[0])
    assert sorted(got) == sorted(want + third), f"partition 0 after the cancellation: {len(got)}"
    for i, n in enumerate(nodes):
        assert "panicked" not in n.log_text(), f"node {i + 1} panicked: {n.log_tail()}"


def test_kafka_topics_replica_assignment_places_each_partition_where_asked(cluster):
    """kafka-topics --create/--alter --replica-assignment (Kafka 4.4.0's TopicCommand, CreateTopics'
    and CreatePartitions' manual assignments) on three nodes: each partition lives on exactly the
    nodes named, its first the preferred leader, every node's Metadata and `--describe` agreeing;
    an assignment naming a node that does not exist, or new partitions of another size, is refused
    with Kafka's words and changes nothing (TopicCommand itself refuses uneven sizes at creation)."""
    nodes = cluster
    bootstrap = nodes[0].bootstrap
    r = kafka_tool("topics", "--bootstrap-server", bootstrap, "--create", "--topic", "manual",
                   "--replica-assignment", "3:1,3:2,1:3", timeout=90)
    assert r.rc == 0, r
    want = {0: [3, 1], 1: [3, 2], 2: [1, 3]}
    placed = wait_pairs(nodes, "manual", 3, "every node names the assigned pairs")
    assert {p: rs for p, (_, rs) in placed.items()} == want
    # The preferred (first) replica leads: it stands for election when it opens the partition.
    wait_until(lambda: {p: l for p, (l, _) in wait_pairs(nodes, "manual", 3, "settled").items()}
               == {p: rs[0] for p, rs in want.items()}, 30, "each partition led by its first replica")
    for p, rs in want.items():
        on = sorted(i + 1 for i, n in enumerate(nodes) if (n.data_dir / f"manual-{p}").exists())
        assert on == sorted(rs), f"manual-{p} on nodes {on}, assigned {rs}"
    # Growing: TopicCommand sends the new partitions' part of the list.
    r = kafka_tool("topics", "--bootstrap-server", bootstrap, "--alter", "--topic", "manual",
                   "--partitions", "4", "--replica-assignment", "3:1,3:2,1:3,2:1", timeout=90)
    assert r.rc == 0, r
    want[3] = [2, 1]
    placed = wait_pairs(nodes, "manual", 4, "the new partition on nodes 2 and 1")
    assert {p: rs for p, (_, rs) in placed.items()} == want
    r = kafka_tool("topics", "--bootstrap-server", nodes[2].bootstrap, "--describe", "--topic", "manual",
                   timeout=90)
    assert r.rc == 0 and "ReplicationFactor: 2" in r.stdout, r
    for p, rs in want.items():
        assert f"Partition: {p}\t" in r.stdout and f"Replicas: {rs[0]},{rs[1]}\t" in r.stdout, r
    produce_acked(nodes, "manual", [b"m-%d" % i for i in range(80)], 4)
    got = read_all(nodes[1], "manual", 4, 80, timeout=60)
    assert sorted(got) == sorted(b"m-%d" % i for i in range(80))

    # Refused as Kafka refuses them: nothing created or added.
    r = kafka_tool("topics", "--bootstrap-server", bootstrap, "--create", "--topic", "nowhere",
                   "--replica-assignment", "1:9", timeout=90)
    assert r.rc != 0 and "includes broker 9, but no such broker is registered" in r.stdout + r.stderr, r
    # TopicCommand refuses uneven sizes itself; librdkafka sends them.
    from confluent_kafka import KafkaError
    from confluent_kafka.admin import NewPartitions
    admin = confluent_admin(nodes[1])  # kept: a collected client fails its futures
    fut = admin.create_partitions(
        [NewPartitions("manual", 5, replica_assignment=[[1, 2, 3]])], request_timeout=30)["manual"]
    with pytest.raises(KafkaException) as e:
        fut.result(timeout=60)
    err = e.value.args[0]
    assert err.code() == KafkaError.INVALID_REPLICA_ASSIGNMENT, err
    assert ("includes a partition with 3 replica(s), but this is not consistent with previous partitions, "
            "which have 2 replica(s)") in err.str(), err
    r = kafka_tool("topics", "--bootstrap-server", bootstrap, "--list", timeout=90)
    assert r.rc == 0 and "nowhere" not in r.stdout, r
    assert len(own_metadata(nodes[0], "manual")) == 4


def test_kafka_reassign_partitions_moves_a_single_replica_partition_under_writes_and_its_node_leaves(
        cluster, tmp_path):
    """kafka-reassign-partitions moves partition 0 of a replication-factor-1 topic to another node
    while an idempotent acks=all producer keeps writing to it (docs/replication.md, "Moving a
    partition of replication factor 1"): the target copies the source's records while the source
    serves, the source stops taking writes once the copy caught up, the target copies the rest and
    serves. `--verify` reports it complete; every send is acknowledged once, at offsets 0..n
    without a gap; the new node's log holds every acknowledged record at its acknowledged offset
    and nothing else; every node's own Metadata names the new node alone; the old node's copy is
    gone from its disk. A node holding a factor-1 partition cannot leave the cluster
    (RemoveRaftVoter is refused); once its partition moved off, it can. A move to a node that is
    down stays under way while the source serves, and `--cancel` ends it."""
    from confluent_kafka import OFFSET_BEGINNING, Producer

    nodes = cluster
    name, partitions = "single", 3
    create_topic(nodes, name, partitions)
    wait_until(lambda: all(sorted(own_metadata(n, name)) == [0, 1, 2] and all(
        e == 0 and len(rs) == 1 for e, _l, rs, _isr in own_metadata(n, name).values()) for n in nodes),
        30, "every node names the one replica of each partition")
    placed = {p: rs[0] for p, (_e, _l, rs, _isr) in own_metadata(nodes[0], name).items()}
    assert sorted(placed.values()) == [1, 2, 3], f"one partition per node: {placed}"
    # About 2 MiB per partition, so the copy takes several chunks (`SEED_CHUNK_BYTES`, 1 MiB).
    first = [b"first-%d-" % i + b"x" * 1000 for i in range(6000)]
    produce_acked(nodes, name, first, partitions)
    src = placed[0]
    to = placed[1]
    assert remove_raft_voter(nodes[to - 1], src) != 0, f"node {src} holds partition 0, its only replica"

    # A producer writes to partition 0 all through the move.
    acked: dict[int, bytes] = {}
    errors: list = []
    prod = Producer({"bootstrap.servers": ",".join(n.bootstrap for n in nodes), "acks": "all",
                     "enable.idempotence": True, "message.timeout.ms": 60000, "linger.ms": 5,
                     "topic.metadata.refresh.interval.ms": 1000, "logger": logging.getLogger("librdkafka"),
                     "broker.address.family": "v4"})

    def delivered(err, msg):
        if err is not None:
            errors.append(err)
        else:
            assert msg.offset() not in acked, f"offset {msg.offset()} acknowledged twice"
            acked[msg.offset()] = msg.value()

    sent = 0

    def send(n: int):
        nonlocal sent
        for _ in range(n):
            prod.produce(name, value=b"during-%d" % sent, partition=0, on_delivery=delivered)
            sent += 1
            prod.poll(0)
            time.sleep(0.002)

    send(200)
    r = reassign_tool(nodes[to - 1], tmp_path, "--execute", {0: [to]}, name)
    assert r.rc == 0 and "Successfully started partition reassignment" in r.stdout, r
    deadline = time.monotonic() + 90
    while True:
        send(50)
        r = reassign_tool(nodes[to - 1], tmp_path, "--verify", {0: [to]}, name, "--preserve-throttles")
        if r.rc == 0 and f"Reassignment of partition {name}-0 is completed" in r.stdout:
            break
        assert time.monotonic() < deadline, f"partition 0 not moved to node {to} within 90 s:\n{r}"
    send(200)
    assert prod.flush(60) == 0 and errors == [], errors[:3]
    assert len(acked) == sent, f"{len(acked)} of {sent} acknowledged"
    before = len(first) // partitions
    assert sorted(acked) == list(range(before, before + sent)), "acknowledged offsets with a gap or a repeat"

    # Every node names the new node alone; its log holds exactly what was acknowledged.
    wait_until(lambda: all(own_metadata(n, name).get(0) == (0, to, [to], [to]) for n in nodes), 30,
               f"every node names node {to} as partition 0's one replica")
    c = Consumer({"bootstrap.servers": nodes[to - 1].bootstrap, "group.id": "moved-reader",
                  "enable.auto.commit": False, "logger": logging.getLogger("librdkafka"),
                  "broker.address.family": "v4"})
    read: dict[int, bytes] = {}
    try:
        c.assign([TopicPartition(name, 0, OFFSET_BEGINNING)])
        deadline = time.monotonic() + 30
        while len(read) < before + sent and time.monotonic() < deadline:
            m = c.poll(0.2)
            if m is not None and m.error() is None:
                assert m.offset() not in read, f"offset {m.offset()} read twice"
                read[m.offset()] = m.value()
        time.sleep(0.5)
        m = c.poll(0.5)
        assert m is None or m.error() is not None, f"a record past the acknowledged ones: {m.offset()}"
    finally:
        c.close()
    want = {i: v for i, v in enumerate(x for i, x in enumerate(first) if i % partitions == 0)}
    want.update(acked)
    assert read == want, f"read {len(read)} records, acknowledged {len(want)}"
    wait_until(lambda: not (nodes[src - 1].data_dir / f"{name}-0").exists(), 30,
               f"node {src}'s copy of partition 0 dropped")
    assert (nodes[to - 1].data_dir / f"{name}-0").exists()

    # Restarted, the new node serves what it holds: it takes the move for neither one under way
    # (copying again) nor one that left (dropping its copy).
    nodes[to - 1].stop()
    nodes[to - 1].start()
    wait_until(lambda: all(own_metadata(n, name).get(0) == (0, to, [to], [to]) for n in nodes), 30,
               f"every node names node {to} as partition 0's one replica after its restart")
    got = read_all(nodes[to - 1], name, partitions, len(want), only=[0])
    assert sorted(got) == sorted(want.values()), f"after the restart: {len(got)} of {len(want)}"

    # A move to a dead node stays under way, the source serving; cancelled, nothing is listed.
    dead = placed[2]
    nodes[dead - 1].kill()
    r = reassign_tool(nodes[to - 1], tmp_path, "--execute", {0: [dead]}, name)
    assert r.rc == 0, r
    r = kafka_tool("reassign-partitions", "--bootstrap-server", nodes[to - 1].bootstrap, "--list", timeout=90)
    assert r.rc == 0, r
    line = next((ln for ln in r.stdout.splitlines() if ln.startswith(f"{name}-0:")), None)
    assert line is not None and f"adding: {dead}" in line and f"removing: {to}" in line, r
    assert own_metadata(nodes[to - 1], name)[0] == (0, to, [dead, to], [to])
    produce_acked([nodes[to - 1]], name, [b"while-stuck"], 1)
    r = reassign_tool(nodes[to - 1], tmp_path, "--cancel", {0: [dead]}, name, "--preserve-throttles")
    assert r.rc == 0 and f"Successfully cancelled partition reassignment for: {name}-0" in r.stdout, r
    assert own_metadata(nodes[to - 1], name)[0] == (0, to, [to], [to])
    got = read_all(nodes[to - 1], name, partitions, len(want) + 1, only=[0])
    assert sorted(got) == sorted(list(want.values()) + [b"while-stuck"])
    nodes[dead - 1].start()

    # Partition 0 moved off, node `src` holds nothing of the topic: it may leave.
    wait_until(lambda: all(n.alive() for n in nodes), 10, "every node up")
    assert remove_raft_voter(nodes[to - 1], src) == 0
    for i, n in enumerate(nodes):
        assert "panicked" not in n.log_text(), f"node {i + 1} panicked: {n.log_tail()}"


def incarnation_of(data_dir) -> str:
    """The incarnation.id a data directory's meta.properties names."""
    for line in (data_dir / "meta.properties").read_text().splitlines():
        if line.startswith("incarnation.id="):
            return line.split("=", 1)[1]
    raise AssertionError(f"no incarnation.id in {data_dir}/meta.properties")


def metadata_log_records(node: Broker) -> dict[int, str]:
    """node id -> incarnation.id (base64) as the Incarnation entries of `node`'s metadata log say."""
    import base64
    import re
    import uuid

    data = b"".join(p.read_bytes() for p in sorted((node.data_dir / "__cluster_metadata-0").glob("*.log")))
    found = {}
    for m in re.finditer(rb'"type":"Incarnation","node":(\d+),"id":"([0-9a-f-]{36})"', data):
        b64 = base64.urlsafe_b64encode(uuid.UUID(m.group(2).decode()).bytes).decode().rstrip("=")
        found.setdefault(int(m.group(1)), b64)
    return found


def start_until_it_stops(node: Broker, why: str) -> str:
    """Start `node`, which must stop by itself (a refused start; it may stop before it even says it
    listens), and return what it logged meanwhile."""
    offset = node.log_path.stat().st_size
    try:
        node.start()
    except BrokerError:
        pass
    wait_until(lambda: not node.alive(), 30, f"{node.sets[0]} on {why} stops")
    return node.log_text(offset)


def test_a_node_that_lost_its_data_directory_is_refused_until_it_rejoins_under_a_new_id(cluster, tmp_path):
    """Each node records its data directory's random incarnation.id in the metadata log once it is
    current, and every node keeps its peers' in peer-incarnations.properties. A node started under
    its old node.id on another directory is refused for good by its peers before any of its Raft
    messages (a vote without its log) is read, and stops with exit code 3 and a message naming the
    remedy:

    * a directory whose incarnation.id is not the recorded one, with the peers' own records deleted
      and the peers restarted: the metadata log's record alone refuses it; the right directory is
      taken again afterwards;
    * node 3's directory wiped while it is down: the two nodes left keep every acknowledged commit
      and take more; node 3 is removed (RemoveRaftVoter) and the machine joins again as node 4 on an
      empty directory, which reads every commit and record."""
    import shutil

    nodes = cluster
    create_topic(nodes, TOPIC, 1, replication_factor=3)
    wait_until(lambda: replicated_settled(nodes, TOPIC), 30, f"{TOPIC} led")
    produce_acked(nodes, TOPIC, [b"k%03d" % i for i in range(20)], 1)
    bootstrap = ",".join(n.bootstrap for n in nodes)
    c = consumer(bootstrap)
    acked = 0
    for _ in range(5):
        acked += 1
        commit_until_acked(c, acked)

    own = {i + 1: incarnation_of(n.data_dir) for i, n in enumerate(nodes)}
    assert len(set(own.values())) == 3
    for n in nodes:
        wait_until(lambda n=n: metadata_log_records(n) == own, 30, f"{n.sets[0]}'s metadata log records every node")
    lost = nodes[2]
    first = own[3]
    for n in nodes[:2]:
        wait_until(lambda n=n: f"node.3={first}" in (n.data_dir / "peer-incarnations.properties").read_text(),
                   30, f"{n.sets[0]} recorded node 3's incarnation")

    def refused_start(why: str) -> str:
        text = start_until_it_stops(lost, why)
        assert lost.proc.returncode == 3, (lost.proc.returncode, text)
        assert "not the one the cluster knew" in text and "RemoveRaftVoter" in text, text
        return text

    # Another incarnation.id on node 3's directory, the peers' own records gone: refused by the
    # metadata log's record.
    lost.stop()
    for n in nodes[:2]:
        n.stop()
        (n.data_dir / "peer-incarnations.properties").unlink()
        n.start()
    props = lost.data_dir / "meta.properties"
    kept = props.read_text()
    props.write_text(kept.replace(f"incarnation.id={first}", "incarnation.id=AAAAAAAAAAAAAAAAAAAAAA"))
    text = refused_start("an altered directory")
    assert "AAAAAAAAAAAAAAAAAAAAAA" in text and first in text, text
    props.write_text(kept)
    lost.start()
    acked += 1
    commit_until_acked(c, acked)
    wait_until(lambda: lost.alive() and all(
        f"node.3={first}" in (n.data_dir / "peer-incarnations.properties").read_text() for n in nodes[:2]),
        30, "node 3 taken again on its own directory, and the peers' records back")

    # Node 3's directory lost.
    lost.kill()
    shutil.rmtree(lost.data_dir)
    text = refused_start("an empty directory")
    second = incarnation_of(lost.data_dir)
    assert second != first
    assert first in text and second in text, text
    assert any("refused for good" in n.log_text() for n in nodes[:2])

    # Nothing acknowledged is lost, and the two nodes left go on.
    acked += 1
    commit_until_acked(c, acked)
    assert committed(nodes[0].bootstrap) == acked
    produce_acked(nodes[:2], TOPIC, [b"k%03d" % i for i in range(20, 25)], 1)

    # The remedy: node 3 removed; the machine joins again as node 4 on an empty directory.
    assert remove_raft_voter(nodes[0], 3) == 0
    voters = next(s for s in nodes[0].sets if s.startswith("controller.quorum.voters="))
    four = Broker(data_dir=tmp_path / "node4", log_path=tmp_path / "node4.log", listeners=["CONTROLLER"],
                  sets=["node.id=4", voters, f"cluster.id={CLUSTER_ID}"])
    four.start()
    nodes.append(four)  # the fixture kills it too
    assert add_raft_voter(nodes[1], 4, directory_id(4), four.listener("CONTROLLER")) == (0, "NONE")
    wait_until(lambda: all(sorted(r) == [1, 2, 4] for r in offsets_replicas(four).values()), 60,
               "node 4 in every __consumer_offsets group, node 3 out")
    # Node 4 learnt every record from the log, node 3's first one included.
    wait_until(lambda: metadata_log_records(four).get(3) == first and 4 in metadata_log_records(four), 30,
               "node 4's metadata log holds node 3's first incarnation and its own")
    acked += 1
    commit_until_acked(c, acked)
    c.close()
    assert committed(four.bootstrap) == acked
    got = read_all(four, TOPIC, 1, 25, timeout=60)
    assert got == [b"k%03d" % i for i in range(25)], got
    for i, n in enumerate(nodes):
        assert "panicked" not in n.log_text(), f"node {i + 1} panicked: {n.log_tail()}"


def test_a_node_lost_before_its_incarnation_record_applied_is_refused_by_the_peers_that_heard_it(
        tmp_path, monkeypatch):
    """No incarnation record applies in a cluster's first second or so (a metadata leader must be
    elected first), yet the nodes have already voted and acknowledged entries to each other. A peer
    records a node's incarnation.id from its first hello, durably, before reading anything else
    from it, whether or not its own metadata log is current yet; so a node lost in that second and
    started again on an empty directory is refused by every peer it spoke to. Node 3 here runs with
    a failpoint that keeps it from ever proposing its record, standing for a node lost before the
    record applied; it starts first, so its hellos reach the others before any of them is current
    (the first election takes at least one election timeout, a second)."""
    import shutil

    nodes = start_cluster(tmp_path, start=False)
    three = nodes[2]
    monkeypatch.setenv("RINGLEADER_FAILPOINT_NO_INCARNATION_RECORD", "1")
    three.start()
    monkeypatch.delenv("RINGLEADER_FAILPOINT_NO_INCARNATION_RECORD")
    try:
        for n in nodes[:2]:
            n.start()
        first = incarnation_of(three.data_dir)
        own = {1: incarnation_of(nodes[0].data_dir), 2: incarnation_of(nodes[1].data_dir)}
        for n in nodes:
            wait_until(lambda n=n: metadata_log_records(n) == own, 30,
                       f"{n.sets[0]}'s metadata log records nodes 1 and 2 only")
        for n in nodes[:2]:
            assert f"node.3={first}" in (n.data_dir / "peer-incarnations.properties").read_text()
        create_topic(nodes, TOPIC, 1, replication_factor=3)
        wait_until(lambda: replicated_settled(nodes, TOPIC), 30, f"{TOPIC} led")
        c = consumer(",".join(n.bootstrap for n in nodes))
        commit_until_acked(c, 1)

        # Node 3 lost, and started again under its node id on an empty directory.
        three.kill()
        shutil.rmtree(three.data_dir)
        text = start_until_it_stops(three, "an empty directory")
        second = incarnation_of(three.data_dir)
        assert second != first
        assert three.proc.returncode == 3, (three.proc.returncode, text)
        assert first in text and second in text and "RemoveRaftVoter" in text, text
        # Nothing of it got in: no record, and the two others go on.
        assert metadata_log_records(nodes[0]) == own
        commit_until_acked(c, 2)
        c.close()
        assert committed(nodes[1].bootstrap) == 2
    finally:
        for n in nodes:
            n.kill()


def test_a_node_that_lost_one_of_its_raft_logs_refuses_to_start_until_it_is_back(cluster, tmp_path):
    """A part of a data directory lost (one `__consumer_offsets` partition's directory gone, the
    node's incarnation.id intact) would bring that replica back empty under the same id: it would
    vote without its log, then crash on raft-rs's commit-index panic at every start. Every node
    lists its Raft logs in raft-logs.properties once they exist, and a start that finds one gone
    stops with a message naming it and the remedy. Put back, the node starts and serves again."""
    import shutil

    nodes = cluster
    create_topic(nodes, TOPIC, 1, replication_factor=3)
    wait_until(lambda: replicated_settled(nodes, TOPIC), 30, f"{TOPIC} led")
    c = consumer(",".join(n.bootstrap for n in nodes))
    commit_until_acked(c, 1)
    three = nodes[2]
    listed = (three.data_dir / "raft-logs.properties").read_text()
    assert "log=__cluster_metadata-0\n" in listed and "log=__consumer_offsets-49\n" in listed, listed
    three.stop()
    aside = tmp_path / "offsets-7-aside"
    shutil.move(three.data_dir / "__consumer_offsets-7", aside)
    text = start_until_it_stops(three, "a data directory without one of its Raft logs")
    assert three.proc.returncode != 0, text
    assert "__consumer_offsets-7" in text and "RemoveRaftVoter" in text, text
    assert "panicked" not in text, text
    commit_until_acked(c, 2)  # the two others go on

    shutil.move(aside, three.data_dir / "__consumer_offsets-7")
    three.start()
    commit_until_acked(c, 3)
    c.close()
    wait_until(lambda: committed(three.bootstrap) == 3, 30, "node 3 back and serving")
    for n in nodes:
        assert "panicked" not in n.log_text(), n.log_tail()


def test_a_node_whose_client_listener_and_node_to_node_address_share_a_port_is_refused(tmp_path):
    """Both are bound with SO_REUSEPORT (a socket per shard), so without the check the node would
    start and the kernel would hand peers' connections to the client listener and clients' to the
    node-to-node one (a Java test's harness once picked one port for both)."""
    port, other = free_port(), free_port()
    b = Broker(data_dir=tmp_path / "node1", log_path=tmp_path / "node1.log", port=port,
               sets=["node.id=1", f"controller.quorum.voters=1@127.0.0.1:{port},2@127.0.0.1:{other}",
                     f"cluster.id={CLUSTER_ID}"])
    with pytest.raises(BrokerError):
        b.start()
    assert b.proc.returncode not in (None, 0), b.log_tail()
    assert "share a port" in b.log_text() and "controller.quorum.voters" in b.log_text(), b.log_tail()
