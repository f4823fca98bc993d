"""Group admin APIs against Ringleader, from three sides that must agree:
confluent-kafka AdminClient (ListGroups v5, DescribeGroups v5, OffsetFetch v9, OffsetCommit v9,
DeleteGroups v2), kafka-python KafkaAdminClient (ListGroups v5, DescribeGroups v5, OffsetFetch v8,
DeleteGroups v2, OffsetDelete v0) and the `ringleader groups` CLI.

The live group: two confluent-kafka consumers with the range assignor in group `adm-g`,
A=orders[0,1,2], B=orders[3,4,5], with committed offsets."""

from __future__ import annotations

import time

import pytest

from confluent_kafka import ConsumerGroupState, ConsumerGroupTopicPartitions, KafkaError, KafkaException, TopicPartition
from kafka import TopicPartition as KpTopicPartition
from kafka.admin import KafkaAdminClient
import kafka.errors as KpErrors

from harness import (CALL_TIMEOUT_S, NODE_ID, confluent_admin, confluent_consumer, confluent_create, groups_cli,
                     parse_cli_table, wait_until)

GROUP = "adm-g"
# offsets the live members commit: A commits orders 0..2 and other 0, B commits orders 3
COMMITTED = {("orders", 0): 10, ("orders", 1): 11, ("orders", 2): 12, ("orders", 3): 13, ("other", 0): 5}


@pytest.fixture
def gbroker(start_broker):
    b = start_broker("group.initial.rebalance.delay.ms=0")
    admin = confluent_admin(b)
    assert confluent_create(admin, "orders", partitions=6) is None
    assert confluent_create(admin, "other", partitions=2) is None
    return b


class LiveGroup:
    def __init__(self, broker):
        self.a = confluent_consumer(broker, GROUP, client_id="adm-a", partition_assignment_strategy="range")
        self.b = confluent_consumer(broker, GROUP, client_id="adm-b", partition_assignment_strategy="range")
        self.open = [self.a, self.b]

    def start(self):
        self.a.subscribe(["orders"])
        self.b.subscribe(["orders"])
        wait_until(lambda: self.parts(self.a) == [0, 1, 2] and self.parts(self.b) == [3, 4, 5], 30,
                   "A=orders[0,1,2], B=orders[3,4,5]", step=self.poll)
        self.a.commit(offsets=[TopicPartition(t, p, o) for (t, p), o in COMMITTED.items() if (t, p) != ("orders", 3)],
                      asynchronous=False)
        self.b.commit(offsets=[TopicPartition("orders", 3, COMMITTED[("orders", 3)])], asynchronous=False)
        return self

    def poll(self):
        for c in self.open:
            c.poll(0.05)

    @staticmethod
    def parts(c):
        return sorted(tp.partition for tp in c.assignment())

    def close(self):
        while self.open:
            self.open.pop().close()


@pytest.fixture
def live(gbroker):
    g = LiveGroup(gbroker)
    try:
        yield g.start()
    finally:
        g.close()


@pytest.fixture
def kp_admin(gbroker):
    admin = KafkaAdminClient(bootstrap_servers=gbroker.bootstrap, client_id="ringleader-test-kp-admin",
                             request_timeout_ms=10000, bootstrap_timeout_ms=10000)
    yield admin
    admin.close()


# ------------------------------------------------------------------------- confluent-kafka helpers
def c_list(admin, states=None):
    kwargs = {"request_timeout": 15}
    if states is not None:
        kwargs["states"] = set(states)
    res = admin.list_consumer_groups(**kwargs).result(timeout=CALL_TIMEOUT_S)
    assert not res.errors, res.errors
    return {g.group_id: g for g in res.valid}


def c_describe(admin, group):
    return admin.describe_consumer_groups([group], request_timeout=15)[group].result(timeout=CALL_TIMEOUT_S)


def c_offsets(admin, group):
    res = admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions(group)], request_timeout=15)
    out = res[group].result(timeout=CALL_TIMEOUT_S)
    for tp in out.topic_partitions:
        assert tp.error is None, tp
    return {(tp.topic, tp.partition): tp.offset for tp in out.topic_partitions}


def c_delete(admin, group):
    """None on success, else the KafkaError code."""
    try:
        admin.delete_consumer_groups([group], request_timeout=15)[group].result(timeout=CALL_TIMEOUT_S)
        return None
    except KafkaException as e:
        return e.args[0].code()


def c_alter(admin, group, offsets: dict):
    tps = [TopicPartition(t, p, o) for (t, p), o in offsets.items()]
    res = admin.alter_consumer_group_offsets([ConsumerGroupTopicPartitions(group, tps)], request_timeout=15)
    return res[group].result(timeout=CALL_TIMEOUT_S)


# ------------------------------------------------------------------------------------------ tests
def test_confluent_admin_list_describe_offsets_alter_delete(gbroker, live):
    admin = confluent_admin(gbroker)

    listed = c_list(admin)
    assert set(listed) == {GROUP}, listed
    assert listed[GROUP].state == ConsumerGroupState.STABLE
    assert listed[GROUP].is_simple_consumer_group is False
    assert GROUP in c_list(admin, states=[ConsumerGroupState.STABLE])
    assert GROUP not in c_list(admin, states=[ConsumerGroupState.EMPTY])

    d = c_describe(admin, GROUP)
    assert d.group_id == GROUP
    assert d.state == ConsumerGroupState.STABLE
    assert d.partition_assignor == "range"
    assert d.is_simple_consumer_group is False
    assert (d.coordinator.id, d.coordinator.host, d.coordinator.port) == (NODE_ID, "127.0.0.1", gbroker.port)
    members = {m.client_id: m for m in d.members}
    assert set(members) == {"adm-a", "adm-b"}
    for cid, want in (("adm-a", [0, 1, 2]), ("adm-b", [3, 4, 5])):
        m = members[cid]
        assert m.member_id.startswith(cid + "-"), m.member_id
        assert m.host == "/127.0.0.1"
        assert m.group_instance_id is None
        assert sorted((tp.topic, tp.partition) for tp in m.assignment.topic_partitions) == [("orders", p) for p in want]

    assert c_offsets(admin, GROUP) == COMMITTED

    # a group with members cannot be deleted ...
    assert c_delete(admin, GROUP) == KafkaError.NON_EMPTY_GROUP
    # ... and an admin commit (generation -1, no member id) to a non-empty group is refused
    res = c_alter(admin, GROUP, {("orders", 5): 99})
    assert [(tp.partition, tp.error.code() if tp.error else None) for tp in res.topic_partitions] == \
        [(5, KafkaError.UNKNOWN_MEMBER_ID)], res.topic_partitions
    assert c_offsets(admin, GROUP) == COMMITTED

    live.close()  # both members leave (LeaveGroup v1)
    listed = c_list(admin)
    assert listed[GROUP].state == ConsumerGroupState.EMPTY
    assert GROUP in c_list(admin, states=[ConsumerGroupState.EMPTY])
    d = c_describe(admin, GROUP)
    assert d.state == ConsumerGroupState.EMPTY
    assert d.members == []

    # on the Empty group, admin commits are accepted
    res = c_alter(admin, GROUP, {("orders", 0): 42, ("orders", 5): 55})
    assert sorted((tp.partition, tp.offset, tp.error) for tp in res.topic_partitions) == [(0, 42, None), (5, 55, None)]
    assert c_offsets(admin, GROUP) == {**COMMITTED, ("orders", 0): 42, ("orders", 5): 55}

    assert c_delete(admin, GROUP) is None
    assert GROUP not in c_list(admin)
    assert c_offsets(admin, GROUP) == {}, "DeleteGroups must remove the group's offsets"
    assert c_describe(admin, GROUP).state == ConsumerGroupState.DEAD  # DescribeGroups v5: Dead, no error
    assert c_delete(admin, GROUP) == KafkaError.GROUP_ID_NOT_FOUND


def test_kafka_python_admin_list_describe_offsets_delete(gbroker, live, kp_admin):
    listed = {g["group_id"]: g for g in kp_admin.list_groups()}
    assert set(listed) == {GROUP}
    assert (listed[GROUP]["group_state"], listed[GROUP]["protocol_type"], listed[GROUP]["group_type"]) == \
        ("Stable", "consumer", "classic")
    assert [g["group_id"] for g in kp_admin.list_groups(states_filter=["Stable"])] == [GROUP]
    assert kp_admin.list_groups(states_filter=["Empty"]) == []

    d = kp_admin.describe_groups([GROUP])[GROUP]
    assert d["error"] is None, d
    assert (d["group_state"], d["protocol_type"], d["protocol_data"]) == ("Stable", "consumer", "range")
    members = {m["client_id"]: m for m in d["members"]}
    assert set(members) == {"adm-a", "adm-b"}
    for cid, want in (("adm-a", [0, 1, 2]), ("adm-b", [3, 4, 5])):
        assert members[cid]["member_metadata"]["topics"] == ["orders"]
        assert [(x["topic"], sorted(x["partitions"])) for x in members[cid]["member_assignment"]["assigned_partitions"]] \
            == [("orders", want)]

    offsets = kp_admin.list_group_offsets({GROUP: None})[GROUP]
    assert {(tp.topic, tp.partition): om.offset for tp, om in offsets.items()} == COMMITTED
    some = kp_admin.list_group_offsets({GROUP: [KpTopicPartition("orders", 1), KpTopicPartition("orders", 4)]})[GROUP]
    assert {tp.partition: om.offset for tp, om in some.items()} == {1: 11, 4: -1}

    # OffsetDelete on an active consumer group: partitions of subscribed topics are refused with
    # GROUP_SUBSCRIBED_TO_TOPIC, a topic nobody subscribes to is deleted.
    res = kp_admin.delete_group_offsets(GROUP, [KpTopicPartition("orders", 0), KpTopicPartition("other", 0)])
    assert res == {KpTopicPartition("orders", 0): KpErrors.GroupSubscribedToTopicError,
                   KpTopicPartition("other", 0): KpErrors.NoError}, res
    remaining = {(tp.topic, tp.partition): om.offset for tp, om in kp_admin.list_group_offsets({GROUP: None})[GROUP].items()}
    assert remaining == {k: v for k, v in COMMITTED.items() if k != ("other", 0)}

    # DeleteGroups on a group with members
    # (kafka-python 3 returns {group_id: "OK" or the error class name})
    assert kp_admin.delete_groups([GROUP]) == {GROUP: "NonEmptyGroupError"}

    live.close()
    assert kp_admin.describe_groups([GROUP])[GROUP]["group_state"] == "Empty"
    # on the Empty group OffsetDelete removes subscribed topics' offsets too
    res = kp_admin.delete_group_offsets(GROUP, [KpTopicPartition("orders", 3)])
    assert res == {KpTopicPartition("orders", 3): KpErrors.NoError}, res
    remaining = {(tp.topic, tp.partition): om.offset for tp, om in kp_admin.list_group_offsets({GROUP: None})[GROUP].items()}
    assert remaining == {("orders", 0): 10, ("orders", 1): 11, ("orders", 2): 12}

    assert kp_admin.delete_groups([GROUP]) == {GROUP: "OK"}
    assert kp_admin.list_groups() == []
    assert kp_admin.delete_groups([GROUP]) == {GROUP: "GroupIdNotFoundError"}


def _cli_ok(broker, *args):
    p = groups_cli(broker, *args)
    assert p.returncode == 0, f"ringleader groups {' '.join(args)} exited {p.returncode}\n{p.stdout}\n{p.stderr}"
    return p.stdout


def test_cli_agrees_with_the_admin_clients(gbroker, live):
    help_ = groups_cli(gbroker, "--help")
    assert help_.returncode == 0 and "--describe" in help_.stdout, help_
    admin = confluent_admin(gbroker)
    d = c_describe(admin, GROUP)
    member_ids = {m.client_id: m.member_id for m in d.members}

    # --list: one group id per line
    assert _cli_ok(gbroker, "--list").split() == [GROUP]
    rows = parse_cli_table(_cli_ok(gbroker, "--list", "--state"))
    assert [(r["GROUP"], r["STATE"]) for r in rows] == [(GROUP, "Stable")], rows

    # --describe --state
    (row,) = parse_cli_table(_cli_ok(gbroker, "--describe", "--group", GROUP, "--state"))
    assert (row["GROUP"], row["ASSIGNMENT-STRATEGY"], row["STATE"], row["#MEMBERS"]) == (GROUP, "range", "Stable", "2")
    # "host:port (id)": the Java ConsumerGroupCommand prints two spaces before "(id)", the Scala one one
    assert " ".join(row["COORDINATOR (ID)"].split()) == f"127.0.0.1:{gbroker.port} ({NODE_ID})", row

    # --describe --members [--verbose]
    rows = parse_cli_table(_cli_ok(gbroker, "--describe", "--group", GROUP, "--members"))
    assert sorted((r["CONSUMER-ID"], r["CLIENT-ID"], r["HOST"], r["#PARTITIONS"]) for r in rows) == \
        sorted([(member_ids["adm-a"], "adm-a", "/127.0.0.1", "3"), (member_ids["adm-b"], "adm-b", "/127.0.0.1", "3")])
    rows = parse_cli_table(_cli_ok(gbroker, "--describe", "--group", GROUP, "--members", "--verbose"))
    assert {r["CLIENT-ID"]: r["ASSIGNMENT"] for r in rows} == {"adm-a": "orders(0,1,2)", "adm-b": "orders(3,4,5)"}

    # --describe (offsets view, the default): one row per assigned or committed partition
    rows = parse_cli_table(_cli_ok(gbroker, "--describe", "--group", GROUP))
    by_tp = {(r["TOPIC"], int(r["PARTITION"])): r for r in rows}
    assert set(by_tp) == {("orders", p) for p in range(6)} | {("other", 0)}, sorted(by_tp)
    for p in range(6):
        r = by_tp[("orders", p)]
        want = COMMITTED.get(("orders", p))
        assert r["CURRENT-OFFSET"] == (str(want) if want is not None else "-"), r
        assert r["LOG-END-OFFSET"] == "0", r  # no Produce yet: every partition is empty
        assert r["CLIENT-ID"] == ("adm-a" if p < 3 else "adm-b"), r
        assert r["CONSUMER-ID"] == member_ids[r["CLIENT-ID"]], r
    # a committed partition no member owns shows no consumer
    assert (by_tp[("other", 0)]["CURRENT-OFFSET"], by_tp[("other", 0)]["CONSUMER-ID"]) == ("5", "-")

    # --delete refuses a group with members (and leaves it alone)
    p = groups_cli(gbroker, "--delete", "--group", GROUP)
    out = p.stdout + p.stderr
    assert "NON_EMPTY_GROUP" in out or "not empty" in out, out
    assert GROUP in c_list(admin)

    live.close()
    rows = parse_cli_table(_cli_ok(gbroker, "--list", "--state"))
    assert [(r["GROUP"], r["STATE"]) for r in rows] == [(GROUP, "Empty")], rows
    p = groups_cli(gbroker, "--describe", "--group", GROUP, "--state")
    assert p.returncode == 0, p
    # kafka-consumer-groups.sh prints this notice on stderr; either stream is accepted
    assert f"Consumer group '{GROUP}' has no active members." in p.stdout + p.stderr, p
    (row,) = parse_cli_table(p.stdout)
    assert (row["STATE"], row["#MEMBERS"]) == ("Empty", "0")
    rows = parse_cli_table(_cli_ok(gbroker, "--describe", "--group", GROUP))
    assert {(r["TOPIC"], int(r["PARTITION"])): r["CURRENT-OFFSET"] for r in rows} == \
        {k: str(v) for k, v in COMMITTED.items()}
    assert {r["CONSUMER-ID"] for r in rows} == {"-"}

    out = _cli_ok(gbroker, "--delete", "--group", GROUP)
    assert f"Deletion of requested consumer groups ('{GROUP}') was successful." in out, out
    assert _cli_ok(gbroker, "--list").split() == []
    assert GROUP not in c_list(admin)
    p = groups_cli(gbroker, "--describe", "--group", GROUP)
    assert p.returncode != 0 and f"Consumer group '{GROUP}' does not exist." in p.stdout + p.stderr, p


def test_empty_group_keeps_consumer_protocol_type(gbroker, live, kp_admin):
    """Kafka keeps a classic group's ProtocolType ("consumer") when its last member leaves
    (ClassicGroup.protocolType is set by the first member and never cleared), so ListGroups and
    DescribeGroups still report "consumer" and librdkafka does not call it a simple group.
    A group that only ever had admin commits (generation -1) has protocol type "" (simple)."""
    admin = confluent_admin(gbroker)
    live.close()
    # a standalone group, created by an admin commit
    res = c_alter(admin, "simple-g", {("orders", 0): 3})
    assert [(tp.partition, tp.offset, tp.error) for tp in res.topic_partitions] == [(0, 3, None)]

    listed = c_list(admin)
    assert listed["simple-g"].state == ConsumerGroupState.EMPTY
    assert listed["simple-g"].is_simple_consumer_group is True
    assert listed[GROUP].state == ConsumerGroupState.EMPTY
    assert listed[GROUP].is_simple_consumer_group is False, \
        "an emptied consumer group must keep protocol type 'consumer' (ListGroups returned '')"
    kp_listed = {g["group_id"]: g["protocol_type"] for g in kp_admin.list_groups()}
    assert kp_listed == {GROUP: "consumer", "simple-g": ""}
    d = kp_admin.describe_groups([GROUP])[GROUP]
    assert (d["group_state"], d["protocol_type"], d["protocol_data"], d["members"]) == ("Empty", "consumer", "", [])


def test_admin_removes_a_departed_static_member(gbroker, kp_admin):
    """LeaveGroup v3+ batch with MemberId "" and a GroupInstanceId removes a static member that
    closed without leaving (librdkafka sends no LeaveGroup for static members); the remaining
    member is rebalanced at once instead of after the 30 s session timeout."""
    from kafka.admin import MemberToRemove

    group = "adm-static"
    a = confluent_consumer(gbroker, group, client_id="static-a", group_instance_id="inst-admin",
                           session_timeout_ms=30000, partition_assignment_strategy="range")
    b = confluent_consumer(gbroker, group, client_id="dynamic-b", session_timeout_ms=30000,
                           partition_assignment_strategy="range")
    open_ = [a, b]

    def parts(c):
        return sorted(tp.partition for tp in c.assignment())

    def poll():
        for c in open_:
            c.poll(0.05)

    try:
        a.subscribe(["orders"])
        wait_until(lambda: parts(a) == list(range(6)), 30, "A owning orders[0..5]", step=poll)
        b.subscribe(["orders"])
        wait_until(lambda: len(parts(a)) == 3 and len(parts(b)) == 3, 30, "A and B owning three each", step=poll)

        a.close()  # static: no LeaveGroup
        open_.remove(a)
        deadline = time.monotonic() + 1.5
        while time.monotonic() < deadline:
            poll()
        d = kp_admin.describe_groups([group])[group]
        assert (d["group_state"], len(d["members"])) == ("Stable", 2), d
        assert len(parts(b)) == 3

        res = kp_admin.remove_group_members(group, [MemberToRemove(group_instance_id="inst-admin")])
        assert list(res.values()) == [KpErrors.NoError], res
        wait_until(lambda: parts(b) == list(range(6)), 15, "B owning all six after the static member's removal",
                   step=poll)
        d = kp_admin.describe_groups([group])[group]
        assert d["group_state"] == "Stable"
        assert [(m["client_id"], m["group_instance_id"]) for m in d["members"]] == [("dynamic-b", None)]

        # removing it again, or removing an unknown member id: per-member UNKNOWN_MEMBER_ID
        res = kp_admin.remove_group_members(group, [MemberToRemove(group_instance_id="inst-admin")])
        assert list(res.values()) == [KpErrors.UnknownMemberIdError], res
        res = kp_admin.remove_group_members(group, [MemberToRemove(member_id="no-such-member")])
        assert list(res.values()) == [KpErrors.UnknownMemberIdError], res
    finally:
        for c in open_:
            c.close()


def test_offset_fetch_for_several_groups_in_one_request(gbroker, kp_admin):
    """OffsetFetch v8 batches groups (kafka-python sends one request per coordinator)."""
    admin = confluent_admin(gbroker)
    for g, off in (("batch-1", 1), ("batch-2", 2)):
        res = c_alter(admin, g, {("orders", 0): off, ("other", 1): off * 10})
        assert all(tp.error is None for tp in res.topic_partitions), res.topic_partitions
    got = kp_admin.list_group_offsets({"batch-1": None, "batch-2": None, "batch-none": None})
    assert {g: {(tp.topic, tp.partition): om.offset for tp, om in offs.items()} for g, offs in got.items()} == {
        "batch-1": {("orders", 0): 1, ("other", 1): 10},
        "batch-2": {("orders", 0): 2, ("other", 1): 20},
        "batch-none": {},
    }
