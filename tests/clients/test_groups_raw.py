"""Hand-encoded classic group requests (struct) against Ringleader (reference §5.5, §3):
exact generations and leader choice, parked joins and syncs, the timers (initial rebalance delay,
rebalance timeout, session expiry), group.max.size, and the error codes Kafka returns for bad input.

  JoinGroup v1/v4, SyncGroup v0, Heartbeat v0, LeaveGroup v0, OffsetCommit v2, OffsetFetch v1.
"""

from __future__ import annotations

import struct
import time

import pytest

from harness import Reader, confluent_admin, confluent_create, connect, kstring, recv_frame, request_frame

OFFSET_COMMIT, OFFSET_FETCH, JOIN_GROUP, HEARTBEAT, LEAVE_GROUP, SYNC_GROUP = 8, 9, 11, 12, 13, 14

NONE = 0
UNKNOWN_TOPIC_OR_PARTITION = 3
OFFSET_METADATA_TOO_LARGE = 12
ILLEGAL_GENERATION = 22
INCONSISTENT_GROUP_PROTOCOL = 23
INVALID_GROUP_ID = 24
UNKNOWN_MEMBER_ID = 25
INVALID_SESSION_TIMEOUT = 26
REBALANCE_IN_PROGRESS = 27
MEMBER_ID_REQUIRED = 79

CLIENT_ID = "raw-groups"
TOPIC = "raw-topic"
# ConsumerProtocolSubscription v0: version, topics [TOPIC], user data null
SUBSCRIPTION = struct.pack(">h", 0) + struct.pack(">i", 1) + kstring(TOPIC) + struct.pack(">i", -1)
# ConsumerProtocolAssignment v0: version, [TOPIC, [0, 1]], user data null. Groups that admin clients
# describe must carry well-formed assignments: librdkafka 2.16 aborts the process
# (rdkafka_admin.c:960 `rko_result' assertion) on a DescribeGroups member assignment it cannot parse.
ASSIGNMENT = (struct.pack(">h", 0) + struct.pack(">i", 1) + kstring(TOPIC) + struct.pack(">iii", 2, 0, 1)
              + struct.pack(">i", -1))


def kbytes(b: bytes | None) -> bytes:
    return struct.pack(">i", -1) if b is None else struct.pack(">i", len(b)) + b


def read_bytes(r: Reader) -> bytes | None:
    n = r.take(">i")
    if n < 0:
        return None
    b = r.data[r.pos:r.pos + n]
    assert len(b) == n, "response truncated inside bytes"
    r.pos += n
    return b


@pytest.fixture
def gbroker(start_broker):
    b = start_broker("group.initial.rebalance.delay.ms=0")
    assert confluent_create(confluent_admin(b), TOPIC, partitions=2) is None
    return b


class Conn:
    """One connection; each call sends a request and (unless told not to) reads its response."""

    def __init__(self, broker, timeout: float = 10.0):
        self.sock = connect(broker.bootstrap, timeout)
        self.corr = 0

    def send(self, api_key: int, version: int, body: bytes) -> int:
        self.corr += 1
        self.sock.sendall(request_frame(api_key, version, self.corr, body, client_id=CLIENT_ID))
        return self.corr

    def recv(self, corr: int) -> Reader:
        r = Reader(recv_frame(self.sock))
        assert r.take(">i") == corr, "correlation id mismatch"
        return r

    def call(self, api_key: int, version: int, body: bytes) -> Reader:
        return self.recv(self.send(api_key, version, body))

    def close(self):
        self.sock.close()

    # ----------------------------------------------------------------------- group APIs
    @staticmethod
    def join_body(version, group, member_id="", session_ms=30000, rebalance_ms=30000, protocol_type="consumer",
                  protocols=(("range", SUBSCRIPTION),)):
        body = kstring(group) + struct.pack(">i", session_ms)
        if version >= 1:
            body += struct.pack(">i", rebalance_ms)
        body += kstring(member_id) + kstring(protocol_type) + struct.pack(">i", len(protocols))
        for name, meta in protocols:
            body += kstring(name) + kbytes(meta)
        return body

    @staticmethod
    def parse_join(version, r: Reader) -> dict:
        if version >= 2:
            r.take(">i")  # throttle
        out = {"error": r.take(">h"), "generation": r.take(">i"), "protocol": r.string(), "leader": r.string(),
               "member_id": r.string()}
        out["members"] = [(r.string(), read_bytes(r)) for _ in range(r.take(">i"))]
        assert r.remaining() == 0
        return out

    def join(self, version, group, **kw) -> dict:
        return self.parse_join(version, self.call(JOIN_GROUP, version, self.join_body(version, group, **kw)))

    def sync(self, group, generation, member_id, assignments=()) -> tuple[int, bytes | None]:
        body = kstring(group) + struct.pack(">i", generation) + kstring(member_id) + struct.pack(">i", len(assignments))
        for mid, data in assignments:
            body += kstring(mid) + kbytes(data)
        r = self.call(SYNC_GROUP, 0, body)
        return r.take(">h"), read_bytes(r)

    def heartbeat(self, group, generation, member_id) -> int:
        r = self.call(HEARTBEAT, 0, kstring(group) + struct.pack(">i", generation) + kstring(member_id))
        return r.take(">h")

    def leave(self, group, member_id) -> int:
        return self.call(LEAVE_GROUP, 0, kstring(group) + kstring(member_id)).take(">h")

    def commit(self, group, generation, member_id, offsets: dict) -> dict:
        """OffsetCommit v2; offsets {(topic, partition): (offset, metadata)} -> {(topic, partition): error}."""
        by_topic: dict[str, list] = {}
        for (t, p), (o, meta) in offsets.items():
            by_topic.setdefault(t, []).append((p, o, meta))
        body = kstring(group) + struct.pack(">i", generation) + kstring(member_id) + struct.pack(">q", -1)
        body += struct.pack(">i", len(by_topic))
        for t, parts in by_topic.items():
            body += kstring(t) + struct.pack(">i", len(parts))
            for p, o, meta in parts:
                body += struct.pack(">iq", p, o) + kstring(meta)
        r = self.call(OFFSET_COMMIT, 2, body)
        out = {}
        for _ in range(r.take(">i")):
            t = r.string()
            for _ in range(r.take(">i")):
                p, e = r.take(">ih")
                out[(t, p)] = e
        assert r.remaining() == 0
        return out

    def fetch(self, group, topic, partitions) -> dict:
        """OffsetFetch v1 -> {partition: (offset, metadata, error)}."""
        body = kstring(group) + struct.pack(">i", 1) + kstring(topic) + struct.pack(">i", len(partitions))
        body += b"".join(struct.pack(">i", p) for p in partitions)
        r = self.call(OFFSET_FETCH, 1, body)
        out = {}
        for _ in range(r.take(">i")):
            assert r.string() == topic
            for _ in range(r.take(">i")):
                p = r.take(">i")
                out[p] = (r.take(">q"), r.string(), r.take(">h"))
        return out


@pytest.fixture
def conn(gbroker):
    c = Conn(gbroker)
    yield c
    c.close()


def stable_member(conn, group) -> tuple[str, int]:
    """Join (v1: no MEMBER_ID_REQUIRED round) and sync as the only member; returns (member_id, generation)."""
    j = conn.join(1, group)
    assert j["error"] == NONE, j
    err, _ = conn.sync(group, j["generation"], j["member_id"], [(j["member_id"], ASSIGNMENT)])
    assert err == NONE
    return j["member_id"], j["generation"]


def heartbeat_until(conn, group, generation, member_id, want: int, timeout: float = 5.0) -> int:
    """Heartbeat every 50 ms while it returns NONE, until it returns something else (bounded)."""
    deadline = time.monotonic() + timeout
    while True:
        err = conn.heartbeat(group, generation, member_id)
        if err != NONE or time.monotonic() > deadline:
            return err
        time.sleep(0.05)


# ------------------------------------------------------------------------------------- tests
def test_join_sync_heartbeat_commit_and_a_second_member(gbroker, conn):
    g = "raw-g"
    j = conn.join(1, g)
    assert j["error"] == NONE, j
    assert j["generation"] == 1
    assert j["protocol"] == "range"
    assert j["member_id"].startswith(CLIENT_ID + "-") and len(j["member_id"]) == len(CLIENT_ID) + 1 + 36, j
    assert j["leader"] == j["member_id"]
    assert j["members"] == [(j["member_id"], SUBSCRIPTION)], "the leader gets every member's metadata"
    m1 = j["member_id"]

    assert conn.sync(g, 1, m1, [(m1, b"a1")]) == (NONE, b"a1")
    assert conn.heartbeat(g, 1, m1) == NONE
    assert conn.commit(g, 1, m1, {(TOPIC, 0): (5, "m0"), (TOPIC, 1): (6, None)}) == {(TOPIC, 0): NONE, (TOPIC, 1): NONE}
    assert conn.fetch(g, TOPIC, [0, 1]) == {0: (5, "m0", NONE), 1: (6, "", NONE)}

    # a second member joins: its JoinGroup is parked until the first member rejoins
    other = Conn(gbroker)
    try:
        corr2 = other.send(JOIN_GROUP, 1, Conn.join_body(1, g))
        # the first member learns about the rebalance from its heartbeat (once the other
        # connection's JoinGroup has reached the coordinator) ...
        assert heartbeat_until(conn, g, 1, m1, REBALANCE_IN_PROGRESS) == REBALANCE_IN_PROGRESS
        # ... and commits with the old generation are still accepted while PreparingRebalance
        assert conn.commit(g, 1, m1, {(TOPIC, 0): (7, None)}) == {(TOPIC, 0): NONE}
        j1 = conn.join(1, g, member_id=m1)
        j2 = Conn.parse_join(1, other.recv(corr2))
        assert (j1["error"], j2["error"]) == (NONE, NONE)
        assert j1["generation"] == j2["generation"] == 2
        m2 = j2["member_id"]
        assert m2 != m1
        assert j1["leader"] == j2["leader"] == m1, "the old leader stays leader"
        assert sorted(j1["members"]) == sorted([(m1, SUBSCRIPTION), (m2, SUBSCRIPTION)])
        assert j2["members"] == [], "followers get no member list"

        # the follower's SyncGroup is parked until the leader's arrives with the assignments
        corr_s = other.send(SYNC_GROUP, 0, kstring(g) + struct.pack(">i", 2) + kstring(m2) + struct.pack(">i", 0))
        assert conn.sync(g, 2, m1, [(m1, b"for-m1"), (m2, b"for-m2")]) == (NONE, b"for-m1")
        r = other.recv(corr_s)
        assert (r.take(">h"), read_bytes(r)) == (NONE, b"for-m2")

        # the old generation is now stale
        assert conn.heartbeat(g, 1, m1) == ILLEGAL_GENERATION
        assert conn.commit(g, 1, m1, {(TOPIC, 0): (8, None)}) == {(TOPIC, 0): ILLEGAL_GENERATION}
        assert other.commit(g, 2, m2, {(TOPIC, 1): (9, None)}) == {(TOPIC, 1): NONE}
        assert conn.fetch(g, TOPIC, [0, 1]) == {0: (7, "", NONE), 1: (9, "", NONE)}

        # the second member leaves: the leader is told to rejoin and gets generation 3 alone
        assert other.leave(g, m2) == NONE
        assert heartbeat_until(conn, g, 2, m1, REBALANCE_IN_PROGRESS) == REBALANCE_IN_PROGRESS
        j1 = conn.join(1, g, member_id=m1)
        assert (j1["error"], j1["generation"], j1["leader"]) == (NONE, 3, m1)
        assert j1["members"] == [(m1, SUBSCRIPTION)]
        assert conn.sync(g, 3, m1, [(m1, b"all")]) == (NONE, b"all")
        assert other.heartbeat(g, 3, m2) == UNKNOWN_MEMBER_ID
    finally:
        other.close()


def test_join_v4_requires_a_member_id(conn):
    j = conn.join(4, "raw-v4")
    assert j["error"] == MEMBER_ID_REQUIRED, j
    assert j["member_id"].startswith(CLIENT_ID + "-"), j
    assert j["generation"] == -1
    j2 = conn.join(4, "raw-v4", member_id=j["member_id"])
    assert (j2["error"], j2["generation"], j2["member_id"], j2["leader"]) == (NONE, 1, j["member_id"], j["member_id"])


def test_offset_commit_with_wrong_generation_is_illegal_generation(conn):
    m, gen = stable_member(conn, "raw-gen")
    assert gen == 1
    assert conn.commit("raw-gen", gen + 1, m, {(TOPIC, 0): (1, None)}) == {(TOPIC, 0): ILLEGAL_GENERATION}
    assert conn.commit("raw-gen", 0, m, {(TOPIC, 0): (1, None)}) == {(TOPIC, 0): ILLEGAL_GENERATION}
    assert conn.fetch("raw-gen", TOPIC, [0]) == {0: (-1, "", NONE)}, "a refused commit must not be stored"


def test_offset_commit_from_unknown_member_is_unknown_member_id(conn):
    m, gen = stable_member(conn, "raw-unknown")
    assert conn.commit("raw-unknown", gen, "not-a-member", {(TOPIC, 0): (1, None)}) == {(TOPIC, 0): UNKNOWN_MEMBER_ID}
    # generation -1 without a member id: only an Empty group accepts it (admin/standalone commits)
    assert conn.commit("raw-unknown", -1, "", {(TOPIC, 0): (1, None)}) == {(TOPIC, 0): UNKNOWN_MEMBER_ID}
    assert conn.fetch("raw-unknown", TOPIC, [0]) == {0: (-1, "", NONE)}


def test_offset_commit_to_unknown_group(conn):
    # OffsetCommit < v9 with a generation to a group that does not exist: ILLEGAL_GENERATION
    assert conn.commit("raw-nogroup", 3, "m", {(TOPIC, 0): (1, None)}) == {(TOPIC, 0): ILLEGAL_GENERATION}
    # generation -1 creates an empty standalone group and stores the offset
    assert conn.commit("raw-simple", -1, "", {(TOPIC, 0): (11, "x")}) == {(TOPIC, 0): NONE}
    assert conn.fetch("raw-simple", TOPIC, [0, 1]) == {0: (11, "x", NONE), 1: (-1, "", NONE)}


def test_offset_commit_unknown_topic_is_unknown_topic_or_partition(conn):
    m, gen = stable_member(conn, "raw-topic-g")
    assert conn.commit("raw-topic-g", gen, m, {("no-such-topic", 0): (1, None), (TOPIC, 1): (2, None)}) == \
        {("no-such-topic", 0): UNKNOWN_TOPIC_OR_PARTITION, (TOPIC, 1): NONE}


def test_heartbeat_sync_leave_errors(conn):
    assert conn.heartbeat("raw-no-such-group", 1, "someone") == UNKNOWN_MEMBER_ID
    m, gen = stable_member(conn, "raw-hb")
    assert conn.heartbeat("raw-hb", gen, m) == NONE
    assert conn.heartbeat("raw-hb", gen, "someone-else") == UNKNOWN_MEMBER_ID
    assert conn.heartbeat("raw-hb", gen + 5, m) == ILLEGAL_GENERATION
    assert conn.sync("raw-hb", gen + 5, m)[0] == ILLEGAL_GENERATION
    assert conn.sync("raw-no-such-group", 1, "someone")[0] == UNKNOWN_MEMBER_ID
    assert conn.leave("raw-no-such-group", "someone") == UNKNOWN_MEMBER_ID
    assert conn.leave("raw-hb", "someone-else") == UNKNOWN_MEMBER_ID
    assert conn.heartbeat("raw-hb", gen, m) == NONE, "failed requests must not disturb the member"


def test_oversize_commit_metadata_is_offset_metadata_too_large(conn):
    m, gen = stable_member(conn, "raw-meta")
    ok, big = "x" * 4096, "y" * 4097  # offset.metadata.max.bytes = 4096
    res = conn.commit("raw-meta", gen, m, {(TOPIC, 0): (1, ok), (TOPIC, 1): (2, big)})
    assert res == {(TOPIC, 0): NONE, (TOPIC, 1): OFFSET_METADATA_TOO_LARGE}
    assert conn.fetch("raw-meta", TOPIC, [0, 1]) == {0: (1, ok, NONE), 1: (-1, "", NONE)}


def test_join_with_empty_group_id_is_invalid_group_id(conn):
    for version in (0, 1, 4):
        j = conn.join(version, "")
        assert j["error"] == INVALID_GROUP_ID, (version, j)


def test_join_session_timeout_outside_bounds_is_invalid_session_timeout(conn):
    # group.min.session.timeout.ms = 6000, group.max.session.timeout.ms = 1800000
    for session_ms in (5999, 1000, 1_800_001):
        j = conn.join(1, "raw-session", session_ms=session_ms)
        assert j["error"] == INVALID_SESSION_TIMEOUT, (session_ms, j)
    assert conn.join(1, "raw-session", session_ms=6000)["error"] == NONE


def test_min_session_timeout_is_configurable(start_broker):
    b = start_broker("group.initial.rebalance.delay.ms=0", "group.min.session.timeout.ms=10000")
    c = Conn(b)
    try:
        assert c.join(1, "raw-cfg", session_ms=9999)["error"] == INVALID_SESSION_TIMEOUT
        assert c.join(1, "raw-cfg", session_ms=10000)["error"] == NONE
    finally:
        c.close()


def test_join_protocol_checks(conn):
    # unknown group with a member id
    assert conn.join(1, "raw-proto", member_id="made-up-id")["error"] == UNKNOWN_MEMBER_ID
    # empty protocol type / no protocols
    assert conn.join(1, "raw-proto", protocol_type="")["error"] == INCONSISTENT_GROUP_PROTOCOL
    assert conn.join(1, "raw-proto", protocols=())["error"] == INCONSISTENT_GROUP_PROTOCOL
    # a member of another protocol type, or with no protocol in common, cannot join a live group
    m, gen = stable_member(conn, "raw-proto")
    assert conn.join(1, "raw-proto", protocol_type="connect")["error"] == INCONSISTENT_GROUP_PROTOCOL
    assert conn.join(1, "raw-proto", protocols=(("roundrobin", SUBSCRIPTION),))["error"] == INCONSISTENT_GROUP_PROTOCOL
    assert conn.heartbeat("raw-proto", gen, m) == NONE, "rejected joins must not disturb the group"


GROUP_MAX_SIZE_REACHED = 81


def test_group_max_size(start_broker):
    b = start_broker("group.initial.rebalance.delay.ms=0", "group.max.size=1")
    assert confluent_create(confluent_admin(b), TOPIC, partitions=2) is None
    c = Conn(b)
    try:
        m1, gen = stable_member(c, "raw-max")
        j = c.join(1, "raw-max")
        assert j["error"] == GROUP_MAX_SIZE_REACHED, j
        assert c.heartbeat("raw-max", gen, m1) == NONE, "the refused join must not start a rebalance"
    finally:
        c.close()


def test_initial_rebalance_delay(start_broker):
    """group.initial.rebalance.delay.ms: the first join of an Empty group completes after the delay;
    a member that joins during the delay extends it once more (Kafka's newMemberAdded re-arm)."""
    b = start_broker("group.initial.rebalance.delay.ms=1000")
    assert confluent_create(confluent_admin(b), TOPIC, partitions=2) is None
    c1, c2 = Conn(b), Conn(b)
    try:
        t0 = time.monotonic()
        j = c1.join(1, "raw-delay-1")
        alone = time.monotonic() - t0
        assert (j["error"], j["generation"]) == (NONE, 1), j
        assert 0.95 <= alone < 1.8, f"single member: join took {alone:.2f}s, expected one 1 s delay"

        t0 = time.monotonic()
        corr1 = c1.send(JOIN_GROUP, 1, Conn.join_body(1, "raw-delay-2"))
        time.sleep(0.3)
        corr2 = c2.send(JOIN_GROUP, 1, Conn.join_body(1, "raw-delay-2"))
        j1 = Conn.parse_join(1, c1.recv(corr1))
        j2 = Conn.parse_join(1, c2.recv(corr2))
        both = time.monotonic() - t0
        assert (j1["error"], j2["error"]) == (NONE, NONE)
        assert j1["generation"] == j2["generation"] == 1, "both joined within the delay: one generation"
        assert j1["leader"] == j2["leader"] == j1["member_id"]
        assert sorted(m for m, _ in j1["members"]) == sorted([j1["member_id"], j2["member_id"]])
        assert 1.9 <= both < 4.0, f"two members: join took {both:.2f}s, expected the delay twice (re-armed once)"
    finally:
        c1.close()
        c2.close()


def test_member_that_does_not_rejoin_is_removed_after_the_rebalance_timeout(gbroker):
    g = "raw-rebalance-timeout"
    c1, c2, c3 = Conn(gbroker), Conn(gbroker), Conn(gbroker)
    try:
        kw = dict(session_ms=30000, rebalance_ms=2000)
        j = c1.join(1, g, **kw)
        m1 = j["member_id"]
        assert c1.sync(g, 1, m1, [(m1, b"x")])[0] == NONE
        corr2 = c2.send(JOIN_GROUP, 1, Conn.join_body(1, g, **kw))
        assert heartbeat_until(c1, g, 1, m1, REBALANCE_IN_PROGRESS) == REBALANCE_IN_PROGRESS
        j1 = c1.join(1, g, member_id=m1, **kw)
        j2 = Conn.parse_join(1, c2.recv(corr2))
        m2 = j2["member_id"]
        assert j1["generation"] == j2["generation"] == 2
        corr_s = c2.send(SYNC_GROUP, 0, kstring(g) + struct.pack(">i", 2) + kstring(m2) + struct.pack(">i", 0))
        assert c1.sync(g, 2, m1, [(m1, b"a"), (m2, b"b")]) == (NONE, b"a")
        assert c2.recv(corr_s).take(">h") == NONE

        # a third member joins; m1 rejoins, m2 never does
        corr3 = c3.send(JOIN_GROUP, 1, Conn.join_body(1, g, **kw))
        assert heartbeat_until(c1, g, 2, m1, REBALANCE_IN_PROGRESS) == REBALANCE_IN_PROGRESS
        t0 = time.monotonic()
        j1 = c1.join(1, g, member_id=m1, **kw)
        waited = time.monotonic() - t0
        j3 = Conn.parse_join(1, c3.recv(corr3))
        assert (j1["error"], j3["error"]) == (NONE, NONE)
        assert j1["generation"] == j3["generation"] == 3
        assert sorted(m for m, _ in j1["members"]) == sorted([m1, j3["member_id"]]), "m2 must be dropped"
        assert 1.0 < waited < 5.0, f"join completed after {waited:.2f}s; expected the 2 s rebalance timeout"
        assert c2.heartbeat(g, 2, m2) == UNKNOWN_MEMBER_ID
    finally:
        for c in (c1, c2, c3):
            c.close()


def test_session_expiry_removes_a_silent_member(gbroker):
    """A member that stops heartbeating is removed after its session timeout (6 s, the minimum);
    the group, now without members, becomes Empty in a new generation."""
    from confluent_kafka import ConsumerGroupState

    admin = confluent_admin(gbroker)
    c = Conn(gbroker)
    try:
        j = c.join(1, "raw-expiry", session_ms=6000, rebalance_ms=6000)
        m = j["member_id"]
        assert c.sync("raw-expiry", 1, m, [(m, ASSIGNMENT)]) == (NONE, ASSIGNMENT)
        t0 = time.monotonic()

        def state():
            fs = admin.describe_consumer_groups(["raw-expiry"], request_timeout=10)
            return fs["raw-expiry"].result(timeout=15).state

        assert state() == ConsumerGroupState.STABLE
        while state() == ConsumerGroupState.STABLE and time.monotonic() - t0 < 12:
            time.sleep(0.25)
        expired_after = time.monotonic() - t0
        assert state() == ConsumerGroupState.EMPTY
        assert 5.5 <= expired_after < 9, f"member expired after {expired_after:.2f}s, session timeout is 6 s"
        assert c.heartbeat("raw-expiry", 1, m) == UNKNOWN_MEMBER_ID
        # a new member starts generation 3 (2 was the Empty generation written on expiry)
        assert c.join(1, "raw-expiry")["generation"] == 3
    finally:
        c.close()
