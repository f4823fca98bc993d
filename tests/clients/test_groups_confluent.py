"""confluent-kafka (librdkafka 2.16) classic-protocol group consumers against Ringleader:
JoinGroup v5 (MEMBER_ID_REQUIRED then rejoin), SyncGroup v3, Heartbeat v3, OffsetCommit v9,
OffsetFetch v9, LeaveGroup v1, static membership (group.instance.id).

The seed walkthrough (reference §10, Example 1 classic) is reproduced with the `range` assignor:
A alone owns orders[0..5]; B joins, A revokes everything (eager) and the pair settles on
A=[0,1,2], B=[3,4,5]; B leaves and A owns [0..5] again.
"""

from __future__ import annotations

import time

import pytest

from confluent_kafka import TopicPartition

from harness import (
    CALL_TIMEOUT_S,
    assigned,
    close_quietly,
    committed,
    confluent_admin,
    confluent_consumer,
    confluent_create,
    wait_until,
)

GROUP_INITIAL_DELAY_0 = "group.initial.rebalance.delay.ms=0"
ALL6 = [0, 1, 2, 3, 4, 5]


@pytest.fixture
def gbroker(start_broker):
    """A broker whose first join completes at once (the seed ran with delay 0)."""
    return start_broker(GROUP_INITIAL_DELAY_0)


class Recorder:
    """Records on_assign / on_revoke callbacks of several consumers in one ordered list."""

    def __init__(self):
        self.t0 = time.monotonic()
        self.events: list[tuple[float, str, str, list[int]]] = []

    def callbacks(self, name: str):
        def on_assign(consumer, parts):
            self.events.append((round(time.monotonic() - self.t0, 2), name, "assign", sorted(p.partition for p in parts)))

        def on_revoke(consumer, parts):
            self.events.append((round(time.monotonic() - self.t0, 2), name, "revoke", sorted(p.partition for p in parts)))

        return {"on_assign": on_assign, "on_revoke": on_revoke}

    def of(self, name: str) -> list[tuple[str, list[int]]]:
        return [(kind, parts) for _, n, kind, parts in self.events if n == name]

    def __repr__(self) -> str:
        return "\n".join(map(str, self.events))


def poll_all(*consumers, timeout: float = 0.05):
    def step():
        for c in consumers:
            msg = c.poll(timeout)
            assert msg is None or msg.error() is None or msg.error().code() < 0, msg.error()
    return step


def test_seed_walkthrough_classic_range(gbroker):
    admin = confluent_admin(gbroker)
    assert confluent_create(admin, "orders", partitions=6) is None
    rec = Recorder()
    a = confluent_consumer(gbroker, "g-classic", client_id="consumer-a", partition_assignment_strategy="range")
    b = confluent_consumer(gbroker, "g-classic", client_id="consumer-b", partition_assignment_strategy="range")
    try:
        a.subscribe(["orders"], **rec.callbacks("A"))
        wait_until(lambda: rec.of("A"), 30, f"A's first assignment\n{rec}", step=poll_all(a))
        assert rec.of("A") == [("assign", ALL6)], rec
        assert assigned(a) == ALL6

        # B joins: A (the leader) learns of the rebalance on its next heartbeat, revokes all six
        # (eager protocol), rejoins; the range assignor splits by sorted member id (consumer-a < consumer-b).
        b.subscribe(["orders"], **rec.callbacks("B"))
        wait_until(lambda: len(rec.of("A")) >= 3 and rec.of("B"), 30, f"the rebalance after B joined\n{rec}",
                   step=poll_all(a, b))
        assert rec.of("A") == [("assign", ALL6), ("revoke", ALL6), ("assign", [0, 1, 2])], rec
        assert rec.of("B") == [("assign", [3, 4, 5])], rec
        assert (assigned(a), assigned(b)) == ([0, 1, 2], [3, 4, 5])

        # both keep heartbeating for a while: no further rebalance while the group is Stable
        deadline = time.monotonic() + 2.5
        while time.monotonic() < deadline:
            poll_all(a, b)()
        assert len(rec.events) == 4, f"unexpected rebalance in a stable group\n{rec}"

        # B closes: revokes [3,4,5] and sends LeaveGroup; A revokes [0,1,2] and gets all six back.
        b.close()
        assert rec.of("B") == [("assign", [3, 4, 5]), ("revoke", [3, 4, 5])], rec
        closed_at = time.monotonic()
        wait_until(lambda: len(rec.of("A")) >= 5, 30, f"A taking over after B left\n{rec}", step=poll_all(a))
        assert rec.of("A")[3:] == [("revoke", [0, 1, 2]), ("assign", ALL6)], rec
        assert assigned(a) == ALL6
        took = time.monotonic() - closed_at
        # driven by B's LeaveGroup (A hears of it on its next 1 s heartbeat), not by B's 10 s session expiry
        assert took < 8, f"A took {took:.1f}s to take over: was B's LeaveGroup ignored?\n{rec}"

        # explicit synchronous commit (OffsetCommit v9 with member id + generation), then OffsetFetch
        want = {0: 10, 1: 9, 2: 13, 3: 6, 4: 14, 5: 8}  # the seed's committed positions
        res = a.commit(offsets=[TopicPartition("orders", p, o) for p, o in want.items()], asynchronous=False)
        assert {tp.partition: (tp.offset, tp.error) for tp in res} == {p: (o, None) for p, o in want.items()}
        assert committed(a, "orders", ALL6) == want
    finally:
        close_quietly(a, b)

    # a new consumer in the same group (after A left) starts from the committed positions
    c = confluent_consumer(gbroker, "g-classic", client_id="consumer-c", partition_assignment_strategy="range")
    try:
        c.subscribe(["orders"], **rec.callbacks("C"))
        wait_until(lambda: rec.of("C"), 30, f"C's assignment\n{rec}", step=poll_all(c))
        assert rec.of("C") == [("assign", ALL6)], rec
        assert committed(c, "orders", ALL6) == want
    finally:
        close_quietly(c)


def test_commit_metadata_and_uncommitted_partitions(gbroker):
    admin = confluent_admin(gbroker)
    assert confluent_create(admin, "meta-topic", partitions=3) is None
    c = confluent_consumer(gbroker, "g-meta", partition_assignment_strategy="range")
    try:
        c.subscribe(["meta-topic"])
        wait_until(lambda: assigned(c) == [0, 1, 2], 30, "assignment of meta-topic[0..2]", step=poll_all(c))
        c.commit(offsets=[TopicPartition("meta-topic", 1, 77, metadata="checkpoint-1")], asynchronous=False)
        res = {tp.partition: tp for tp in c.committed([TopicPartition("meta-topic", p) for p in (0, 1, 2)],
                                                      timeout=CALL_TIMEOUT_S)}
        assert res[1].offset == 77
        assert res[1].metadata == "checkpoint-1"
        # never committed: librdkafka reports OFFSET_INVALID (-1001) for the broker's -1
        assert res[0].offset == res[2].offset == -1001, res
        # a later commit overwrites
        c.commit(offsets=[TopicPartition("meta-topic", 1, 78)], asynchronous=False)
        assert committed(c, "meta-topic", [1]) == {1: 78}
    finally:
        close_quietly(c)


def test_cooperative_sticky_moves_only_what_it_must(gbroker):
    """Incremental (cooperative) rebalancing over the classic protocol: when B joins, A revokes
    only the partitions that move to B and keeps the rest."""
    admin = confluent_admin(gbroker)
    assert confluent_create(admin, "coop", partitions=4) is None
    rec = Recorder()
    a = confluent_consumer(gbroker, "g-coop", client_id="coop-a", partition_assignment_strategy="cooperative-sticky")
    b = confluent_consumer(gbroker, "g-coop", client_id="coop-b", partition_assignment_strategy="cooperative-sticky")
    try:
        a.subscribe(["coop"], **rec.callbacks("A"))
        wait_until(lambda: assigned(a) == [0, 1, 2, 3], 30, f"A owning coop[0..3]\n{rec}", step=poll_all(a))
        b.subscribe(["coop"], **rec.callbacks("B"))
        wait_until(lambda: len(assigned(a)) == 2 and len(assigned(b)) == 2, 40,
                   f"A and B owning two partitions each\n{rec}", step=poll_all(a, b))
        kept, moved = assigned(a), assigned(b)
        assert sorted(kept + moved) == [0, 1, 2, 3]
        revoked_by_a = [p for kind, parts in rec.of("A") if kind == "revoke" for p in parts]
        assert sorted(revoked_by_a) == moved, f"A must revoke exactly what B gets\n{rec}"
    finally:
        close_quietly(a, b)


def test_static_member_restart_keeps_assignment_without_rebalance(gbroker):
    """A static member (group.instance.id) that closes without LeaveGroup and comes back within its
    session timeout gets its old partitions back; the other member sees no rebalance."""
    admin = confluent_admin(gbroker)
    assert confluent_create(admin, "static-topic", partitions=6) is None
    rec = Recorder()
    static = dict(group_instance_id="inst-1", client_id="static-a", session_timeout_ms=10000,
                  partition_assignment_strategy="range")
    a = confluent_consumer(gbroker, "g-static", **static)
    b = confluent_consumer(gbroker, "g-static", client_id="dynamic-b", session_timeout_ms=10000,
                           partition_assignment_strategy="range")
    a2 = None
    try:
        a.subscribe(["static-topic"], **rec.callbacks("A"))
        wait_until(lambda: assigned(a) == ALL6, 30, f"A owning all six\n{rec}", step=poll_all(a))
        b.subscribe(["static-topic"], **rec.callbacks("B"))
        wait_until(lambda: len(assigned(a)) == 3 and len(assigned(b)) == 3, 30,
                   f"A and B owning three each\n{rec}", step=poll_all(a, b))
        parts_a, parts_b = assigned(a), assigned(b)
        assert sorted(parts_a + parts_b) == ALL6

        before = describe_group(admin, "g-static")
        assert before.state.name == "STABLE"
        members_before = {m.client_id: m for m in before.members}
        assert set(members_before) == {"static-a", "dynamic-b"}
        assert members_before["static-a"].group_instance_id == "inst-1"
        assert members_before["dynamic-b"].group_instance_id is None
        b_events_before = list(rec.of("B"))

        # A closes: librdkafka sends no LeaveGroup for a static member, so the group stays Stable
        # with A's membership held until its session timeout (10 s).
        a.close()
        t_closed = time.monotonic()
        deadline = time.monotonic() + 1.5
        while time.monotonic() < deadline:
            poll_all(b)()
        mid = describe_group(admin, "g-static")
        assert mid.state.name == "STABLE", mid.state
        assert len(mid.members) == 2, [m.member_id for m in mid.members]

        # A restarts with the same instance id well within the session timeout
        a2 = confluent_consumer(gbroker, "g-static", **static)
        a2.subscribe(["static-topic"], **rec.callbacks("A2"))
        wait_until(lambda: rec.of("A2"), 20, f"restarted A's assignment\n{rec}", step=poll_all(a2, b))
        assert time.monotonic() - t_closed < 10, "restart took longer than the session timeout"
        assert rec.of("A2") == [("assign", parts_a)], f"static member must get its partitions back\n{rec}"

        # keep both polling for a few heartbeat intervals: B must see no revocation at all
        deadline = time.monotonic() + 4
        while time.monotonic() < deadline:
            poll_all(a2, b)()
        assert rec.of("B") == b_events_before, f"B must not be rebalanced by a static rejoin\n{rec}"
        assert assigned(b) == parts_b and assigned(a2) == parts_a

        after = describe_group(admin, "g-static")
        assert after.state.name == "STABLE"
        members_after = {m.client_id: m for m in after.members}
        assert set(members_after) == {"static-a", "dynamic-b"}
        # B keeps its member id; A's instance id is kept but it got a new member id (the old one is fenced)
        assert members_after["dynamic-b"].member_id == members_before["dynamic-b"].member_id
        assert members_after["static-a"].group_instance_id == "inst-1"
        assert members_after["static-a"].member_id != members_before["static-a"].member_id
        assert members_after["static-a"].member_id.startswith("inst-1-"), members_after["static-a"].member_id
        assert sorted(tp.partition for tp in members_after["static-a"].assignment.topic_partitions) == parts_a
        assert sorted(tp.partition for tp in members_after["dynamic-b"].assignment.topic_partitions) == parts_b
    finally:
        close_quietly(*(c for c in (a, b, a2) if c is not None))


def describe_group(admin, group: str):
    fs = admin.describe_consumer_groups([group], request_timeout=15)
    return fs[group].result(timeout=CALL_TIMEOUT_S)
