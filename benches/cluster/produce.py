#!/usr/bin/env python3
"""The produce row of scripts/bench-cluster.sh: replicated produce throughput and delivery latency.

One confluent-kafka (librdkafka) producer, bootstrapped with every node of the system:

1. creates the topic (--partitions, --replication-factor) through AdminClient, retrying a create that timed out
   or failed with a retriable error (right after a Ringleader cluster starts, its metadata log may have no leader
   for a moment; a retried create that had taken effect answers TOPIC_ALREADY_EXISTS, which is accepted);
2. waits until Metadata names a leader for every partition of the topic;
3. produces --value-bytes values without keys, acks=all, enable.idempotence=true, linger.ms=5, spreading them
   over the partitions round-robin (the partition is given with each record), with at most --window records
   outstanding (produced, no delivery report yet), for --warmup seconds and then --duration measured seconds;
4. stops producing and flushes.

Measured (over the window after the warm-up): records whose delivery report arrived in it, per second and MB/s
(values only); each such record's latency from its produce() call to its delivery callback (p50, p99, max); the
CPU time of the --server-pid processes (utime + stime, /proc/PID/stat, summed, as hbflood --server-pid samples
it) per second of the window, and so per record. Output: one JSON line on stdout. Exit status 1 if any record
failed (delivery error, or not delivered within 60 s of the end) or the set-up failed; the JSON is printed
either way, when there is one.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import statistics
import sys
import time

from confluent_kafka import KafkaError, KafkaException, Producer
from confluent_kafka.admin import AdminClient, NewTopic

# The data-path benchmark's /proc/PID/stat reader, so both rows sample broker CPU the same way.
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "data"))
from produce_consume import proc_cpu_seconds  # noqa: E402


def log(msg: str) -> None:
    print(f"produce: {msg}", flush=True, file=sys.stderr)


def cpu_secs(pids: list[int]) -> float | None:
    """utime + stime of every pid, summed (seconds); None when one is gone."""
    total = 0.0
    for pid in pids:
        secs = proc_cpu_seconds(pid)
        if secs is None:
            return None
        total += secs
    return total


def pct(sorted_vals: list[float], q: float) -> float | None:
    if not sorted_vals:
        return None
    return sorted_vals[min(len(sorted_vals) - 1, int(q * len(sorted_vals)))]


def ms(secs: float | None) -> float | None:
    return None if secs is None else round(secs * 1e3, 3)


RETRIABLE_CREATE = {KafkaError.REQUEST_TIMED_OUT, KafkaError._TIMED_OUT, KafkaError.NOT_CONTROLLER,
                    KafkaError.LEADER_NOT_AVAILABLE, KafkaError.NOT_LEADER_FOR_PARTITION,
                    KafkaError._TRANSPORT, KafkaError.BROKER_NOT_AVAILABLE, KafkaError.COORDINATOR_NOT_AVAILABLE}


def create_topic(admin: AdminClient, topic: str, partitions: int, rf: int, timeout: float) -> int:
    """Create the topic, retrying retriable failures until `timeout`; the number of attempts."""
    deadline = time.monotonic() + timeout
    attempt = 0
    while True:
        attempt += 1
        fs = admin.create_topics([NewTopic(topic, num_partitions=partitions, replication_factor=rf)],
                                 request_timeout=20, operation_timeout=15)
        try:
            fs[topic].result(timeout=40)
            return attempt
        except KafkaException as e:
            err = e.args[0]
            if err.code() == KafkaError.TOPIC_ALREADY_EXISTS and attempt > 1:
                return attempt
            if (err.retriable() or err.code() in RETRIABLE_CREATE) and time.monotonic() < deadline:
                log(f"create {topic} (attempt {attempt}): {err.name()}: {err.str()}; retrying")
                time.sleep(0.5)
                continue
            raise


def wait_leaders(admin: AdminClient, topic: str, partitions: int, timeout: float) -> dict:
    """Until Metadata names a leader for every partition; {partition: (leader, replicas)}."""
    deadline = time.monotonic() + timeout
    last = None
    while True:
        try:
            md = admin.list_topics(topic=topic, timeout=5)
            t = md.topics.get(topic)
            if t is not None and t.error is None:
                ps = t.partitions
                last = {p: (m.leader, list(m.replicas)) for p, m in ps.items()}
                if len(ps) == partitions and all(m.leader >= 0 and m.error is None for m in ps.values()):
                    return last
            else:
                last = t.error if t is not None else None
        except KafkaException as e:
            last = e
        if time.monotonic() > deadline:
            raise RuntimeError(f"{topic}: not every partition has a leader after {timeout:.0f} s (last: {last})")
        time.sleep(0.2)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bootstrap", required=True, help="every node, comma-separated")
    ap.add_argument("--topic", default="bench-produce")
    ap.add_argument("--partitions", type=int, default=6)
    ap.add_argument("--replication-factor", type=int, required=True)
    ap.add_argument("--duration", type=float, default=10.0, help="measured seconds")
    ap.add_argument("--warmup", type=float, default=3.0, help="unmeasured seconds before them")
    ap.add_argument("--value-bytes", type=int, default=100)
    ap.add_argument("--window", type=int, default=10000, help="most records outstanding (no delivery report yet)")
    ap.add_argument("--linger-ms", type=int, default=5)
    ap.add_argument("--server-pid", default="", help="broker pids, comma-separated (CPU samples)")
    ap.add_argument("--create-timeout", type=float, default=60.0)
    ap.add_argument("--label", default="")
    args = ap.parse_args()
    logging.basicConfig(level=logging.ERROR)
    pids = [int(p) for p in args.server_pid.split(",") if p]

    result: dict = {"label": args.label, "topic": args.topic, "partitions": args.partitions,
                    "replication_factor": args.replication_factor, "value_bytes": args.value_bytes,
                    "window": args.window, "linger_ms": args.linger_ms, "warmup_s": args.warmup,
                    "duration_s": args.duration, "acks": "all", "idempotence": True}
    common = {"bootstrap.servers": args.bootstrap, "broker.address.family": "v4",
              "logger": logging.getLogger("librdkafka")}
    t0 = time.monotonic()
    admin = AdminClient(common)
    try:
        result["create_attempts"] = create_topic(admin, args.topic, args.partitions, args.replication_factor,
                                                 args.create_timeout)
        result["create_s"] = round(time.monotonic() - t0, 3)
        leaders = wait_leaders(admin, args.topic, args.partitions, args.create_timeout)
    except (KafkaException, RuntimeError) as e:
        result["error"] = f"set-up: {e}"
        print(json.dumps(result), flush=True)
        log(result["error"])
        return 1
    result["leaders_s"] = round(time.monotonic() - t0, 3)
    result["leaders"] = {str(p): leaders[p][0] for p in sorted(leaders)}
    result["replicas"] = {str(p): leaders[p][1] for p in sorted(leaders)}
    log(f"{args.label}: topic {args.topic} ready after {result['leaders_s']} s "
        f"({result['create_attempts']} create attempt(s)); leaders {result['leaders']}")

    fatal: list[str] = []

    def on_error(err: KafkaError) -> None:
        if err.fatal():
            fatal.append(f"{err.name()}: {err.str()}")

    # Per-partition FIFO of produce() times: the delivery reports of one partition arrive in produce order
    # (idempotence keeps a partition's records in order, failures included).
    nparts = args.partitions
    sent_at: list[list[float]] = [[] for _ in range(nparts)]
    head = [0] * nparts
    state = {"outstanding": 0, "measuring": False, "done": False}
    lat: list[float] = []
    errors: dict[str, int] = {}
    counts = {"delivered": 0, "measured": 0, "measured_errors": 0}
    now = time.monotonic

    def on_delivery(err, msg) -> None:
        t = now()
        p = msg.partition()
        i = head[p]
        head[p] = i + 1
        state["outstanding"] -= 1
        if err is not None:
            errors[err.name()] = errors.get(err.name(), 0) + 1
            if state["measuring"]:
                counts["measured_errors"] += 1
            return
        counts["delivered"] += 1
        if state["measuring"]:
            counts["measured"] += 1
            lat.append(t - sent_at[p][i])

    producer = Producer({**common, "acks": "all", "enable.idempotence": True, "linger.ms": args.linger_ms,
                         "error_cb": on_error, "on_delivery": on_delivery, "client.id": "bench-produce"})
    value = os.urandom(args.value_bytes)
    topic = args.topic
    produce = producer.produce
    poll = producer.poll
    seq = 0
    start = now()
    m0 = start + args.warmup
    m1 = m0 + args.duration
    cpu0 = cpu1 = None
    w0 = w1 = None
    produced = 0
    try:
        while True:
            t = now()
            if w0 is None and t >= m0:
                cpu0, w0 = cpu_secs(pids), t
                state["measuring"] = True
            if t >= m1:
                cpu1, w1 = cpu_secs(pids), t
                state["measuring"] = False
                break
            if fatal:
                break
            if state["outstanding"] >= args.window:
                poll(0.001)
                continue
            # a burst, then serve the delivery reports
            for _ in range(64):
                p = seq % nparts
                seq += 1
                try:
                    sent_at[p].append(now())
                    produce(topic, value, partition=p)
                except BufferError:
                    sent_at[p].pop()
                    seq -= 1
                    break
                state["outstanding"] += 1
                produced += 1
            poll(0)
        left = producer.flush(60)
    except KeyboardInterrupt:
        left = producer.flush(5)
    secs = (w1 - w0) if w0 is not None and w1 is not None else None

    lat.sort()
    result.update({
        "produced": produced,
        "delivered": counts["delivered"],
        "undelivered": left,
        "errors": sum(errors.values()),
        "error_codes": errors,
        "fatal": fatal,
        "measured_s": round(secs, 3) if secs else None,
        "records": counts["measured"],
        "records_per_s": counts["measured"] / secs if secs else None,
        "mb_per_s": counts["measured"] * args.value_bytes / secs / 1e6 if secs else None,
        "latency_ms": {"p50": ms(pct(lat, 0.50)), "p99": ms(pct(lat, 0.99)), "max": ms(lat[-1] if lat else None),
                       "mean": ms(statistics.fmean(lat) if lat else None)},
        "server_pids": pids,
    })
    if cpu0 is not None and cpu1 is not None and secs:
        result["server_cpu"] = (cpu1 - cpu0) / secs  # cores busy over the window
        result["server_cpu_us_per_record"] = ((cpu1 - cpu0) / counts["measured"] * 1e6
                                              if counts["measured"] else None)
    failed = bool(errors) or left > 0 or bool(fatal) or not counts["measured"]
    if failed:
        result["error"] = (f"errors {errors}, undelivered {left}, fatal {fatal}, measured records "
                           f"{counts['measured']}")
    print(json.dumps(result), flush=True)
    log(f"{args.label}: {result['records_per_s'] or 0:,.0f} records/s, {result['mb_per_s'] or 0:.2f} MB/s, "
        f"p50 {result['latency_ms']['p50'] or 0:.1f} ms, p99 {result['latency_ms']['p99'] or 0:.1f} ms, "
        f"broker CPU {result.get('server_cpu_us_per_record') or 0:.1f} us/record"
        + (f"; FAILED: {result['error']}" if failed else ""))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
