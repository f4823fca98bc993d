"""Hand-encoded requests (struct) against Ringleader: ApiVersions negotiation edge cases,
FindCoordinator v0, and garbage/malformed input that must not hurt the broker."""

from __future__ import annotations

import random
import socket
import struct
import time

from harness import (NODE_ID, Reader, confluent_admin, confluent_create, connect, kstring,
                     parse_api_versions_v0, recv_frame, request_frame, roundtrip, wait_closed)

API_VERSIONS = 18
METADATA = 3
FIND_COORDINATOR = 10
CREATE_TOPICS = 19
UNSUPPORTED_VERSION = 35
COORDINATOR_NOT_AVAILABLE = 15

# What the first milestone promises to answer (key: (min, max)).
PROMISED = {API_VERSIONS: (0, 4), METADATA: (0, 13), CREATE_TOPICS: (2, 7), FIND_COORDINATOR: (0, 6)}


def test_api_versions_v0_lists_the_promised_apis(broker):
    payload = roundtrip(broker.bootstrap, request_frame(API_VERSIONS, 0, 4242))
    corr, err, keys, trailing = parse_api_versions_v0(payload)
    assert corr == 4242
    assert err == 0
    assert trailing == 0, f"{trailing} unexpected trailing bytes after a v0 ApiVersionsResponse"
    table = {k: (lo, hi) for k, lo, hi in keys}
    assert len(table) == len(keys), "duplicate api keys"
    for key, (lo, hi) in PROMISED.items():
        assert key in table, f"api key {key} not advertised; got {sorted(table)}"
        assert table[key][0] <= lo and table[key][1] >= hi, (key, table[key], (lo, hi))
    for k, (lo, hi) in table.items():
        assert 0 <= lo <= hi, (k, lo, hi)


def test_api_versions_too_new_gets_v0_unsupported_version(broker):
    # ApiVersions v9 (does not exist): the broker must not parse the body and must answer in
    # the v0 format with UNSUPPORTED_VERSION and at least the ApiVersions range (KIP-511).
    body = b"\x00\x01\x02garbage-body-the-broker-must-not-parse"
    payload = roundtrip(broker.bootstrap, request_frame(API_VERSIONS, 9, 777, body))
    corr, err, keys, trailing = parse_api_versions_v0(payload)
    assert corr == 777
    assert err == UNSUPPORTED_VERSION, err
    assert trailing == 0, f"{trailing} unexpected trailing bytes (response must be v0 format)"
    table = {k: (lo, hi) for k, lo, hi in keys}
    assert API_VERSIONS in table, keys
    assert table[API_VERSIONS] == (0, 4), table[API_VERSIONS]


def test_api_versions_then_metadata_on_same_connection(broker):
    # After the v9 rejection the same connection stays usable (the client retries lower).
    with connect(broker.bootstrap) as s:
        s.sendall(request_frame(API_VERSIONS, 9, 1))
        corr, err, _, _ = parse_api_versions_v0(recv_frame(s))
        assert (corr, err) == (1, UNSUPPORTED_VERSION)
        s.sendall(request_frame(API_VERSIONS, 0, 2))
        corr, err, keys, _ = parse_api_versions_v0(recv_frame(s))
        assert (corr, err) == (2, 0) and keys
        # Metadata v1 with an empty topic array: header + brokers + controller id + topics
        s.sendall(request_frame(METADATA, 1, 3, struct.pack(">i", 0)))
        r = Reader(recv_frame(s))
        assert r.take(">i") == 3
        n_brokers = r.take(">i")
        brokers = []
        for _ in range(n_brokers):
            node = r.take(">i")
            host = r.string()
            port = r.take(">i")
            rack = r.string()
            brokers.append((node, host, port, rack))
        assert [(b[0], b[1], b[2]) for b in brokers] == [(NODE_ID, "127.0.0.1", broker.port)]
        assert r.take(">i") == NODE_ID  # controller id
        assert r.take(">i") == 0  # no topics asked, none returned
        assert r.remaining() == 0


def _find_coordinator_v0(bootstrap, group, correlation_id):
    payload = roundtrip(bootstrap, request_frame(FIND_COORDINATOR, 0, correlation_id, kstring(group)))
    r = Reader(payload)
    corr = r.take(">i")
    err = r.take(">h")
    node = r.take(">i")
    host = r.string()
    port = r.take(">i")
    assert r.remaining() == 0, "trailing bytes in FindCoordinator v0 response"
    return corr, err, node, host, port


def test_find_coordinator_v0_raw(broker):
    deadline = time.monotonic() + 15
    attempt = 0
    while True:
        attempt += 1
        corr, err, node, host, port = _find_coordinator_v0(broker.bootstrap, "raw-group", 900 + attempt)
        assert corr == 900 + attempt
        if err != COORDINATOR_NOT_AVAILABLE or time.monotonic() > deadline:
            break
        assert (node, host, port) == (-1, "", -1), "on error v0 answers NodeId -1, Host '', Port -1"
        time.sleep(0.3)
    assert err == 0, f"FindCoordinator error {err}"
    assert (node, host, port) == (NODE_ID, "127.0.0.1", broker.port)


# ------------------------------------------------------------------------------ garbage
def _expect_closed_or_error(broker, sock, what, correlation_id=None, timeout=5.0):
    state, data = wait_closed(sock, timeout)
    if state == "closed":
        return
    # Still open: acceptable only if the broker answered this request with a response frame.
    assert len(data) >= 8, f"{what}: connection neither closed nor answered within {timeout}s (got {data!r})"
    size, corr = struct.unpack_from(">ii", data)
    assert size == len(data) - 4, f"{what}: malformed reply frame {data[:64]!r}"
    if correlation_id is not None:
        assert corr == correlation_id, f"{what}: reply with wrong correlation id {corr}"


def test_garbage_input_closes_connection_and_broker_survives(broker):
    rng = random.Random(20240611)
    admin = confluent_admin(broker)
    assert confluent_create(admin, "survivor", partitions=2) is None

    # (a) random bytes: a plausible length prefix followed by that many random bytes,
    #     and a blob of random bytes whose "length" is > 1 GiB.
    body = bytes(rng.getrandbits(8) for _ in range(64))
    api_key = struct.unpack_from(">h", body)[0]
    assert not 0 <= api_key <= 100, "seed must give an unknown api key"
    with connect(broker.bootstrap) as s:
        s.sendall(struct.pack(">i", len(body)) + body)
        _expect_closed_or_error(broker, s, "random frame body")
    blob = b"\x7f" + bytes(rng.getrandbits(8) for _ in range(4095))
    with connect(broker.bootstrap) as s:
        s.sendall(blob)
        _expect_closed_or_error(broker, s, "random bytes (huge length prefix)")

    # (b) negative and oversize length prefixes, and an empty frame
    for size in (-1, -2147483648, 0x7FFFFFFF, 200 * 1024 * 1024):
        with connect(broker.bootstrap) as s:
            s.sendall(struct.pack(">i", size) + b"\x00\x12\x00\x00\x00\x00\x00\x01")
            state, _ = wait_closed(s, 5.0)
            assert state == "closed", f"length prefix {size} must make the broker close the connection"
    with connect(broker.bootstrap) as s:
        s.sendall(struct.pack(">i", 0))
        _expect_closed_or_error(broker, s, "empty frame")

    # (c) truncated frame then half-close: the broker sees EOF mid-frame and must close too
    with connect(broker.bootstrap) as s:
        full = request_frame(METADATA, 1, 5, struct.pack(">i", 0))
        s.sendall(full[: len(full) // 2])
        s.shutdown(socket.SHUT_WR)
        state, data = wait_closed(s, 5.0)
        assert state == "closed" and data == b"", (state, data)
    # truncated frame then abrupt close (nothing to observe but the broker must not mind)
    s = connect(broker.bootstrap)
    s.sendall(struct.pack(">i", 100) + b"\x00\x03\x00\x01")
    s.close()

    # (d) valid header with an unknown api key
    with connect(broker.bootstrap) as s:
        s.sendall(request_frame(999, 0, 31))
        _expect_closed_or_error(broker, s, "unknown api key 999", correlation_id=31)
    with connect(broker.bootstrap) as s:
        s.sendall(request_frame(-7, 0, 32))
        _expect_closed_or_error(broker, s, "negative api key", correlation_id=32)

    # (e) valid header for Metadata v99
    with connect(broker.bootstrap) as s:
        s.sendall(request_frame(METADATA, 99, 33, struct.pack(">i", -1)))
        _expect_closed_or_error(broker, s, "Metadata v99", correlation_id=33)

    # a valid request header with a truncated body (Metadata v1 topic array says 5, has none)
    with connect(broker.bootstrap) as s:
        s.sendall(request_frame(METADATA, 1, 34, struct.pack(">i", 5)))
        _expect_closed_or_error(broker, s, "Metadata v1 with truncated body", correlation_id=34)

    # The broker is still alive and serves real clients.
    assert broker.alive(), f"broker died:\n{broker.log_tail()}"
    md = confluent_admin(broker).list_topics(timeout=20)
    assert "survivor" in md.topics and len(md.topics["survivor"].partitions) == 2
    payload = roundtrip(broker.bootstrap, request_frame(API_VERSIONS, 0, 99))
    assert parse_api_versions_v0(payload)[:2] == (99, 0)
    assert broker.alive()


def test_many_connections_open_and_close(broker):
    # 200 short connections with one ApiVersions each, plus 50 idle ones closed at once.
    for i in range(200):
        payload = roundtrip(broker.bootstrap, request_frame(API_VERSIONS, 0, i))
        assert parse_api_versions_v0(payload)[:2] == (i, 0)
    idle = [connect(broker.bootstrap) for _ in range(50)]
    for s in idle:
        s.close()
    payload = roundtrip(broker.bootstrap, request_frame(API_VERSIONS, 0, 5000))
    assert parse_api_versions_v0(payload)[:2] == (5000, 0)
    assert broker.alive()


def test_pipelined_requests_answered_in_order(broker):
    with connect(broker.bootstrap) as s:
        s.sendall(b"".join(request_frame(API_VERSIONS, v, 100 + i) for i, v in enumerate([0, 1, 2, 0, 1])))
        corrs = [parse_api_versions_v0(recv_frame(s))[0] if i in (0, 3) else
                 struct.unpack_from(">i", recv_frame(s))[0] for i in range(5)]
        assert corrs == [100, 101, 102, 103, 104]
